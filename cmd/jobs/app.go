package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/queue"
)

// Exit codes: the CLI contract.
const (
	exitOK        = 0
	exitError     = 1 // the command failed (Redis unreachable, job not found, ...)
	exitUsage     = 2 // bad flags or arguments
	exitDuplicate = 3 // enqueue: the job already exists (its ID is printed)
)

// usageError marks a bad invocation: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitCodeError carries an exit code other than 1 for an error already explained.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

// env holds what commands need besides their flags: the streams (tests swap them).
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// run is the whole program: it parses args, runs the command and returns the exit code,
// having printed any error as one line on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(&env{stdin: stdin, stdout: stdout, stderr: stderr})
	args, err := hoistFlags(app, args)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "jobs:", describe(err))
	var ue *usageError
	var ce *exitCodeError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, queue.ErrInvalid), errors.Is(err, queue.ErrPayloadTooLarge):
		return exitUsage
	}
	return exitError
}

// newApp builds the command tree.
func newApp(e *env) *cli.App {
	stdin, stdout, stderr := e.stdin, e.stdout, e.stderr
	app := &cli.App{
		Name:    "jobs",
		Usage:   "a Redis-only job system: enqueue, run and inspect jobs",
		Version: version(),
		Description: "Jobs are stored in Redis as plain keys (see KEYS.md). Point every command at the\n" +
			"same Redis with --redis or JOBS_REDIS_URL.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "redis", Value: "redis://127.0.0.1:6379/0", EnvVars: []string{"JOBS_REDIS_URL"},
				Usage: "Redis URL: redis://[user:password@]host:port/db, rediss:// for TLS"},
			&cli.BoolFlag{Name: "cluster", EnvVars: []string{"JOBS_REDIS_CLUSTER"},
				Usage: "--redis is a Redis Cluster: redis://host1:port1?addr=host2:port2&addr=host3:port3"},
			&cli.StringFlag{Name: "sentinel-master", EnvVars: []string{"JOBS_SENTINEL_MASTER"},
				Usage: "the addresses in --redis are Sentinels (redis://s1:26379?addr=s2:26379); use the master they call `NAME`"},
			&cli.StringFlag{Name: "prefix", Value: queue.DefaultPrefix, EnvVars: []string{"JOBS_PREFIX"},
				Usage: "prefix of every key, to share one Redis between systems"},
			&cli.StringFlag{Name: "tls-ca", EnvVars: []string{"JOBS_TLS_CA"},
				Usage: "PEM file of the CA that signed the Redis server's certificate (implies TLS)"},
			&cli.StringFlag{Name: "tls-cert", EnvVars: []string{"JOBS_TLS_CERT"},
				Usage: "PEM client certificate, for a Redis that requires one (with --tls-key)"},
			&cli.StringFlag{Name: "tls-key", EnvVars: []string{"JOBS_TLS_KEY"},
				Usage: "PEM key of --tls-cert"},
			&cli.IntFlag{Name: "events", Value: queue.DefaultEvents, EnvVars: []string{"JOBS_EVENTS"},
				Usage: "keep about `N` event stream entries per queue for jobs tail (an entry holds one call's events: one job's, or a batch's); 0 writes none (every command that changes jobs, workers included)"},
		},
		Commands: []*cli.Command{
			enqueueCommand(e),
			workerCommand(e),
			inspectCommand(e),
			batchCommand(e),
			devCommand(e),
			lsCommand(e),
			statsCommand(e),
			tailCommand(e),
			workersCommand(e),
			retryCommand(e),
			cancelCommand(e),
			purgeCommand(e),
			schedulerCommand(e),
			cronCommand(e),
			limitCommand(e),
			benchCommand(e),
			doctorCommand(e),
			dashCommand(e),
		},
		Before: func(c *cli.Context) error { return checkEmpty(c, c.App.Flags) },
		Reader: stdin, Writer: stdout, ErrWriter: stderr,
		HideHelpCommand: true,
		// Errors are printed once, by run, and never exit the process from inside the app.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return &usageError{flagMessage(c, err.Error())}
		},
		// Reached only when no command matched.
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unknown command %q; see jobs --help", c.Args().First())
			}
			_ = cli.ShowAppHelp(c)
			return usagef("no command given")
		},
	}
	app.Commands = append(app.Commands, pauseCommands(e)...)
	app.Commands = append(app.Commands, helpCommand(), versionCommand(e))
	// urfave/cli adds --help to the app only when it has no command called help.
	app.Flags = append(app.Flags, cli.HelpFlag)
	var setUsage func(path string, cmds []*cli.Command)
	setUsage = func(path string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			cmd.OnUsageError = app.OnUsageError
			if len(cmd.Subcommands) > 0 && cmd.Action == nil {
				cmd.Action = groupAction(strings.TrimSpace(path + " " + cmd.Name))
			}
			// urfave/cli adds a "help" subcommand (alias "h") to each command, so
			// `jobs enqueue h` or `jobs cancel help` printed help instead of taking the
			// word as a job type or ID. Commands without subcommands get none; their
			// help is --help / -h.
			if len(cmd.Subcommands) == 0 {
				cmd.HideHelpCommand = true
			}
			if cmd.Before == nil {
				cmd.Before = checkFlags
			}
			setUsage(path+" "+cmd.Name, cmd.Subcommands)
		}
	}
	setUsage("", app.Commands)
	return app
}

// connect opens the Redis named by --redis and checks that it answers, so a wrong address
// fails in seconds with a clear message instead of hanging. An optional queue.Config
// gives settings besides the prefix, which always comes from --prefix.
func connect(c *cli.Context, configs ...queue.Config) (*queue.Client, error) {
	t := targetOf(c)
	raw := t.url
	rdb, err := openRedis(t)
	if err != nil {
		return nil, err
	}
	var cfg queue.Config
	if len(configs) > 0 {
		cfg = configs[0]
	}
	cfg.Prefix = c.String("prefix")
	events, err := eventsFlag(c)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	cfg.Events = events
	client, err := queue.NewClient(rdb, cfg)
	if err != nil {
		rdb.Close()
		return nil, usagef("--prefix: %v", err)
	}
	pctx, cancel := context.WithTimeout(c.Context, 5*time.Second)
	defer cancel()
	if err := ping(pctx, rdb); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cannot reach Redis at %s: %v", redact(raw), err)
	}
	return client, nil
}

// eventsFlag is --events as queue.Config.Events: 0 (no events) is negative there, where
// 0 means the default.
func eventsFlag(c *cli.Context) (int, error) {
	switch n := c.Int("events"); {
	case n < 0:
		return 0, usagef("--events %d: want 0 (off) or more", n)
	case n == 0:
		return -1, nil
	default:
		return n, nil
	}
}

// redisTarget is what the global flags say about the Redis to use.
type redisTarget struct {
	url           string // --redis
	cluster       bool   // --cluster
	master        string // --sentinel-master
	ca, cert, key string // --tls-ca, --tls-cert, --tls-key
}

func targetOf(c *cli.Context) redisTarget {
	return redisTarget{url: c.String("redis"), cluster: c.Bool("cluster"), master: c.String("sentinel-master"),
		ca: c.String("tls-ca"), cert: c.String("tls-cert"), key: c.String("tls-key")}
}

// openRedis builds the client for --redis (see redisConfig). A bad URL or TLS file is a
// usage error here; an unreachable Redis fails later.
func openRedis(t redisTarget) (redis.UniversalClient, error) {
	newClient, err := redisConfig(t)
	if err != nil {
		return nil, err
	}
	return newClient(), nil
}

// redisConfig reads --redis and the flags around it: one server, or with --cluster a
// Redis Cluster (go-redis's cluster URL: redis://h1:p1?addr=h2:p2&addr=h3:p3), or with
// --sentinel-master the master that the Sentinels at those addresses name. It returns
// how to build the client, and builds nothing itself: a client with min_idle_conns
// starts dialing at once.
func redisConfig(t redisTarget) (func() redis.UniversalClient, error) {
	raw, cluster, master := t.url, t.cluster, t.master
	badURL := func(err error) error {
		msg := err.Error()
		if i, j := strings.Index(raw, "://"), strings.LastIndex(raw, "@"); i >= 0 && j > i+3 ||
			strings.Contains(raw, "password=") {
			msg = "not a valid redis:// or rediss:// URL" // the parser's message may quote the password
		}
		shown := redact(raw)
		if strings.ContainsFunc(shown, func(r rune) bool { return !unicode.IsPrint(r) }) {
			shown = strconv.Quote(shown) // a newline must not split the one-line error
		}
		return usagef("--redis %s: %s", shown, msg)
	}
	// Fail fast on a wrong address (DialerRetries); workers retry with their own backoff.
	const dialTimeout, maxRetries, dialerRetries = 2 * time.Second, 1, 2
	if cluster && master != "" {
		return nil, usagef("--cluster and --sentinel-master exclude each other")
	}
	if err := checkPool(raw); err != nil {
		return nil, badURL(err)
	}
	switch {
	case cluster:
		opts, err := redis.ParseClusterURL(raw)
		if err != nil {
			return nil, badURL(err)
		}
		if opts.TLSConfig, err = tlsConfig(t, opts.TLSConfig, opts.Addrs[0]); err != nil {
			return nil, err
		}
		opts.DialTimeout, opts.MaxRetries, opts.DialerRetries = dialTimeout, maxRetries, dialerRetries
		return func() redis.UniversalClient { return redis.NewClusterClient(opts) }, nil
	case master != "":
		opts, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return nil, badURL(err)
		}
		// go-redis takes the URL's user:password for the Sentinels; ours are the data's
		// (the master's), as with the other forms. Sentinels that require a password of
		// their own get it from JOBS_SENTINEL_PASSWORD.
		if opts.Username == "" && opts.Password == "" {
			opts.Username, opts.Password = opts.SentinelUsername, opts.SentinelPassword
		}
		opts.SentinelUsername, opts.SentinelPassword = "", os.Getenv("JOBS_SENTINEL_PASSWORD")
		opts.MasterName = master
		if opts.TLSConfig, err = tlsConfig(t, opts.TLSConfig, opts.SentinelAddrs[0]); err != nil {
			return nil, err
		}
		opts.DialTimeout, opts.MaxRetries, opts.DialerRetries = dialTimeout, maxRetries, dialerRetries
		return func() redis.UniversalClient { return redis.NewFailoverClient(opts) }, nil
	default:
		opts, err := redis.ParseURL(raw)
		if err != nil {
			return nil, badURL(err)
		}
		if opts.TLSConfig, err = tlsConfig(t, opts.TLSConfig, opts.Addr); err != nil {
			return nil, err
		}
		opts.DialTimeout, opts.MaxRetries, opts.DialerRetries = dialTimeout, maxRetries, dialerRetries
		return func() redis.UniversalClient { return redis.NewClient(opts) }, nil
	}
}

// poolLimits bound the sizes a --redis URL may set that go-redis allocates by up front
// (pool_size=2000000000 ran the process out of memory, pool_size=-5 panicked: found by
// FuzzOpenRedis and a review). The names are go-redis's URL parameters, the same in its
// three URL forms, so they are checked once on the URL itself.
var poolLimits = []struct {
	name        string
	least, most int
}{
	{"pool_size", 0, maxConns}, {"min_idle_conns", 0, maxConns}, {"max_idle_conns", 0, maxConns},
	{"max_active_conns", 0, maxConns}, {"max_concurrent_dials", 0, maxConns},
	{"pipeline_pool_size", -1, maxConns}, // -1 turns the pipeline pool off
	{"pipeline_read_buffer_size", 0, maxBuffer}, {"pipeline_write_buffer_size", 0, maxBuffer},
}

const maxConns, maxBuffer = 10000, 64 << 20

// checkPool refuses a pool or buffer size out of poolLimits. A URL that does not parse,
// or a value that is not a number, is left to go-redis's parser to report.
func checkPool(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	q := u.Query()
	for _, l := range poolLimits {
		for _, v := range q[l.name] {
			if n, err := strconv.Atoi(v); err == nil && (n < l.least || n > l.most) {
				return fmt.Errorf("%s=%d: want %d to %d", l.name, n, l.least, l.most)
			}
		}
	}
	return nil
}

// ping checks that Redis answers: every master of a cluster, since each holds some
// queues.
func ping(ctx context.Context, rdb redis.UniversalClient) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			if err := m.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("%s: %w", m.Options().Addr, err)
			}
			return nil
		})
	}
	return rdb.Ping(ctx).Err()
}

// tlsConfig adds the --tls-* files to conf (nil: no TLS yet): any of them turns TLS on
// (as rediss:// does); the server name defaults to the host of addr.
func tlsConfig(t redisTarget, conf *tls.Config, addr string) (*tls.Config, error) {
	ca, cert, key := t.ca, t.cert, t.key
	if ca == "" && cert == "" && key == "" {
		return conf, nil
	}
	if (cert == "") != (key == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if conf == nil {
		host, _, _ := net.SplitHostPort(addr)
		conf = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, usagef("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--tls-ca %s: no PEM certificate in it", ca)
		}
		conf.RootCAs = pool
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, usagef("--tls-cert/--tls-key: %v", err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// redact hides the password of a Redis URL, for messages and logs.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Not a URL url.Parse accepts (FuzzRedact found `"` in a password): hide
		// everything between the scheme and the last '@'.
		if i, j := strings.Index(raw, "://"), strings.LastIndex(raw, "@"); i >= 0 && j > i {
			raw = raw[:i+3] + "xxxxx" + raw[j:]
		}
		return redactQuery(raw)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			raw = u.String()
		}
	}
	return redactQuery(raw)
}

// redactQuery hides the values of password= and sentinel_password= parameters, which
// go-redis's cluster and failover URLs accept. It works on the text, not a parsed URL,
// so a '#' or a bad escape cannot hide a parameter from it.
func redactQuery(raw string) string {
	var b strings.Builder
	for {
		i := strings.Index(raw, "password=")
		if i < 0 {
			b.WriteString(raw)
			return b.String()
		}
		i += len("password=")
		b.WriteString(raw[:i])
		b.WriteString("xxxxx")
		raw = raw[i:]
		if j := strings.IndexByte(raw, '&'); j >= 0 {
			raw = raw[j:]
		} else {
			raw = ""
		}
	}
}

// describe is the line printed for err. Redis's OOM reply names a setting, not what it
// means for the user: add that Redis is full and what to do about it.
//
// The queue package's ErrInvalid prefixes its messages with "queue: invalid argument",
// the Go API's sentinel: the CLI says only what was wrong.
func describe(err error) string {
	msg := strings.ReplaceAll(oneLine(err.Error()), queue.ErrInvalid.Error()+": ", "")
	if redis.IsOOMError(err) {
		msg += " (Redis is out of memory and refused the write: raise its maxmemory, or free memory, e.g. jobs purge QUEUE --state done)"
	}
	return msg
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// emptyMeansNone are the string flags whose empty value means something: jobs dev
// --dash "" serves no dashboard.
var emptyMeansNone = []string{"dash"}

// checkEmpty refuses a string flag given an empty value: it would silently mean the
// default or nothing (--id "" generated an ID, --exclusive-key "" keyed on the type,
// --prefix "" meant jobs). A global flag may have come from its environment variable
// instead: the message names both.
func checkEmpty(c *cli.Context, flags []cli.Flag) error {
	for _, f := range flags {
		name := f.Names()[0]
		if !c.IsSet(name) || slices.Contains(emptyMeansNone, name) {
			continue
		}
		empty := false
		switch f := f.(type) {
		case *cli.StringFlag:
			empty = c.String(name) == ""
			if empty && len(f.EnvVars) > 0 {
				return usagef("--%s is empty (or %s is set empty): give a value or leave it out", name, f.EnvVars[0])
			}
		case *cli.StringSliceFlag:
			empty = slices.Contains(c.StringSlice(name), "")
		}
		if empty {
			return usagef("--%s '': an empty value is not allowed; leave the flag out for its default", name)
		}
	}
	return nil
}

// checkFlags refuses flag values that every command must refuse, before the command runs.
func checkFlags(c *cli.Context) error {
	if err := checkEmpty(c, c.Command.Flags); err != nil {
		return err
	}
	for _, f := range c.Command.Flags {
		if _, ok := f.(*cli.StringFlag); !ok || !c.IsSet(f.Names()[0]) {
			continue
		}
		switch name := f.Names()[0]; name {
		case "queue":
			if err := checkQueueFlag(c.String(name)); err != nil {
				return err
			}
		case "id":
			// JSON cannot carry bytes that are not UTF-8 (encoding/json writes U+FFFD), so
			// such an ID printed by --json could never be typed back to inspect or cancel.
			if !utf8.ValidString(c.String(name)) {
				return usagef("--id %s: a job ID must be valid UTF-8", shown(c.String(name)))
			}
		}
	}
	return nil
}

// checkQueueFlag checks a queue name given to --queue. A name starting with '-' is
// refused though queue accepts it: after --queue it is most likely a forgotten value
// (`--queue --json` would make "--json" the queue), and as an argument (jobs ls QUEUE) it
// reads as a flag.
func checkQueueFlag(name string) error {
	if strings.HasPrefix(name, "-") {
		return usagef("--queue %s: a queue name may not start with '-' (a value missing after --queue?)", shown(name))
	}
	if err := queue.ValidateQueue(name); err != nil {
		return usagef("--queue: %v", err)
	}
	return nil
}
