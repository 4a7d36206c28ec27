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
	"strings"
	"time"

	"github.com/jobs-dev/jobs/queue"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
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
	err := app.RunContext(ctx, hoistFlags(app, args))
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "jobs:", oneLine(err.Error()))
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
		Name:  "jobs",
		Usage: "a Redis-only job system: enqueue, run and inspect jobs",
		Description: "Jobs are stored in Redis as plain keys (see KEYS.md). Point every command at the\n" +
			"same Redis with --redis or JOBS_REDIS_URL.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "redis", Value: "redis://127.0.0.1:6379/0", EnvVars: []string{"JOBS_REDIS_URL"},
				Usage: "Redis URL: redis://[user:password@]host:port/db, rediss:// for TLS"},
			&cli.StringFlag{Name: "prefix", Value: queue.DefaultPrefix, EnvVars: []string{"JOBS_PREFIX"},
				Usage: "prefix of every key, to share one Redis between systems"},
			&cli.StringFlag{Name: "tls-ca", EnvVars: []string{"JOBS_TLS_CA"},
				Usage: "PEM file of the CA that signed the Redis server's certificate (implies TLS)"},
			&cli.StringFlag{Name: "tls-cert", EnvVars: []string{"JOBS_TLS_CERT"},
				Usage: "PEM client certificate, for a Redis that requires one (with --tls-key)"},
			&cli.StringFlag{Name: "tls-key", EnvVars: []string{"JOBS_TLS_KEY"},
				Usage: "PEM key of --tls-cert"},
		},
		Commands: []*cli.Command{
			enqueueCommand(e),
			workerCommand(e),
			inspectCommand(e),
			devCommand(e),
			lsCommand(e),
			statsCommand(e),
			retryCommand(e),
			cancelCommand(e),
			purgeCommand(e),
			schedulerCommand(e),
			cronCommand(e),
			benchCommand(e),
			doctorCommand(e),
		},
		Reader: stdin, Writer: stdout, ErrWriter: stderr,
		HideHelpCommand: true,
		// Errors are printed once, by run, and never exit the process from inside the app.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return &usageError{err.Error()}
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
	var setUsage func([]*cli.Command)
	setUsage = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			cmd.OnUsageError = app.OnUsageError
			setUsage(cmd.Subcommands)
		}
	}
	setUsage(app.Commands)
	return app
}

// connect opens the Redis named by --redis and checks that it answers, so a wrong address
// fails in seconds with a clear message instead of hanging. An optional queue.Config
// gives settings besides the prefix, which always comes from --prefix.
func connect(c *cli.Context, configs ...queue.Config) (*queue.Client, error) {
	raw := c.String("redis")
	opts, err := redis.ParseURL(raw)
	if err != nil {
		msg := err.Error()
		if i, j := strings.Index(raw, "://"), strings.LastIndex(raw, "@"); i >= 0 && j > i+3 {
			msg = "not a valid redis:// or rediss:// URL" // the parser's message may quote the password
		}
		return nil, usagef("--redis %s: %s", redact(raw), msg)
	}
	if err := applyTLS(c, opts); err != nil {
		return nil, err
	}
	opts.DialTimeout = 2 * time.Second
	opts.MaxRetries = 1
	opts.DialerRetries = 2 // fail fast on a wrong address; workers retry with their own backoff
	rdb := redis.NewClient(opts)
	var cfg queue.Config
	if len(configs) > 0 {
		cfg = configs[0]
	}
	cfg.Prefix = c.String("prefix")
	client, err := queue.NewClient(rdb, cfg)
	if err != nil {
		rdb.Close()
		return nil, usagef("--prefix: %v", err)
	}
	pctx, cancel := context.WithTimeout(c.Context, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cannot reach Redis at %s: %v", redact(raw), err)
	}
	return client, nil
}

// applyTLS adds the --tls-* files to opts: any of them turns TLS on (as rediss:// does);
// the server name defaults to the host of --redis.
func applyTLS(c *cli.Context, opts *redis.Options) error {
	ca, cert, key := c.String("tls-ca"), c.String("tls-cert"), c.String("tls-key")
	if ca == "" && cert == "" && key == "" {
		return nil
	}
	if (cert == "") != (key == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if opts.TLSConfig == nil {
		host, _, _ := net.SplitHostPort(opts.Addr)
		opts.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return usagef("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return usagef("--tls-ca %s: no PEM certificate in it", ca)
		}
		opts.TLSConfig.RootCAs = pool
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return usagef("--tls-cert/--tls-key: %v", err)
		}
		opts.TLSConfig.Certificates = []tls.Certificate{pair}
	}
	return nil
}

// redact hides the password of a Redis URL, for messages and logs.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Not a URL url.Parse accepts (FuzzRedact found `"` in a password): hide
		// everything between the scheme and the last '@'.
		if i, j := strings.Index(raw, "://"), strings.LastIndex(raw, "@"); i >= 0 && j > i {
			return raw[:i+3] + "xxxxx" + raw[j:]
		}
		return raw
	}
	if u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
