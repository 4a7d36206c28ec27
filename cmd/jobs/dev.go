package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/cron"
	webdash "github.com/jobs-dev/jobs/dash"
	"github.com/jobs-dev/jobs/internal/devserver"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

func devCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run an in-memory Redis with a worker and a scheduler attached, to try jobs with nothing installed",
		Description: "Nothing is durable: every job is gone when jobs dev stops. The worker runs the\n" +
			"built-in echo type (its result is its payload) and any --run TYPE=COMMAND; the scheduler\n" +
			"fires --cron entries and those of `jobs cron add`. From another shell, point the CLI at it:\n\n" +
			"   jobs dev                       # listens on 127.0.0.1:6379\n" +
			"   jobs --redis redis://127.0.0.1:6379 enqueue echo hello\n" +
			"   jobs --redis redis://127.0.0.1:6379 inspect ID\n\n" +
			"   jobs dev --demo                # a one-minute tour: enqueues jobs, shows them move, exits",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:6379", Usage: "loopback address to listen on (127.0.0.1:0 for any free port)"},
			&cli.StringSliceFlag{Name: "run", Usage: "TYPE=COMMAND: also run COMMAND for jobs of TYPE (repeatable)"},
			&cli.IntFlag{Name: "concurrency", Value: worker.DefaultConcurrency, Usage: "jobs run at once"},
			&cli.StringSliceFlag{Name: "cron", Usage: "'NAME SPEC TYPE [PAYLOAD]': a cron entry (repeatable)"},
			&cli.BoolFlag{Name: "demo", Usage: "enqueue a few example jobs, show their lifecycle, then exit"},
			&cli.StringFlag{Name: "dash", Value: defaultDashAddr, Usage: "serve the web dashboard on this loopback `ADDR` (\"\" for none)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("dev takes no arguments, got %q", c.Args().First())
			}
			mux := worker.NewMux()
			mux.HandleFunc("echo", func(ctx context.Context, j *queue.Job) error {
				worker.SetResult(ctx, j.Payload)
				return nil
			})
			execs, err := addRuns(mux, c.StringSlice("run"))
			if err != nil {
				return err
			}
			if c.Int("concurrency") <= 0 {
				return usagef("--concurrency %d: must be at least 1", c.Int("concurrency"))
			}
			entries, err := parseCrons(c.StringSlice("cron"))
			if err != nil {
				return err
			}
			if err := checkPrograms(c.StringSlice("run"), execs); err != nil {
				return err
			}
			if c.Bool("demo") {
				entries = append(entries, cron.Entry{Name: "demo-tick", Spec: "@every 1s", Type: "echo", Payload: "fired by cron"})
			}
			addr := c.String("addr")
			if c.Bool("demo") && !c.IsSet("addr") {
				addr = "127.0.0.1:0" // never clash with a Redis already on 6379
			}
			// The embedded Redis has no password, and this process's worker runs the --run
			// programs on whatever it is sent: it serves this machine only.
			addr, why, err := loopbackAddr(c.Context, addr)
			if err != nil {
				return usagef("--addr: %v", err)
			}
			if why != "" {
				return usagef("--addr %s %s: jobs dev's Redis has no password and serves this machine only (run redis-server with a password for a network)", c.String("addr"), why)
			}
			srv, err := devserver.Start(addr)
			if err != nil {
				return fmt.Errorf("%v (is a Redis already listening there? try --addr 127.0.0.1:0)", err)
			}
			defer srv.Close()
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer rdb.Close()
			client, err := queue.NewClient(rdb, queue.Config{Prefix: c.String("prefix")})
			if err != nil {
				return usagef("--prefix: %v", err)
			}
			for _, e := range execs {
				e.Client = client
			}
			if err := checkRunTypes(client, mux); err != nil {
				return err
			}
			url := "redis://" + srv.Addr()
			fmt.Fprintf(e.stderr, "jobs dev: in-memory Redis at %s; NOTHING IS DURABLE: every job is gone when this stops\n", url)
			dashAddr := c.String("dash")
			if c.Bool("demo") && !c.IsSet("dash") {
				dashAddr = "" // the demo exits within a minute: no dashboard to open
			}
			if dashAddr != "" {
				var opts webdash.Options
				listen, err := dashAuth(c.Context, "", dashAddr, &opts)
				if err != nil {
					return usagef("--dash: %v (jobs dev serves the dashboard on loopback only)", err)
				}
				opts.Logger = slog.New(slog.NewTextHandler(e.stderr, nil))
				dashURL, stopDash, err := serveDash(listen, client, opts)
				if err != nil {
					return fmt.Errorf("%v (try --dash 127.0.0.1:0 for any free port, or --dash '' for none)", err)
				}
				defer stopDash()
				fmt.Fprintf(e.stderr, "jobs dev: dashboard at %s\n", dashURL)
			}

			level := slog.LevelInfo
			if c.Bool("demo") {
				level = slog.LevelError + 4 // the demo prints every transition itself
				for typ, h := range demoHandlers() {
					mux.Handle(typ, h)
				}
			}
			ctx, stop := context.WithCancel(c.Context)
			defer stop()
			w, err := worker.New(client, worker.Config{
				Handler: mux, Concurrency: c.Int("concurrency"), ShutdownTimeout: 5 * time.Second,
				Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level})),
			})
			if err != nil {
				return err
			}
			s, err := cron.New(client, cron.Config{Entries: entries,
				Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))})
			if err != nil {
				return usagef("%v", err)
			}
			done := make(chan error, 2)
			go func() { done <- w.Run(ctx) }()
			go func() { done <- s.Run(ctx) }()

			if !c.Bool("demo") {
				fmt.Fprintf(e.stderr, "jobs dev: worker running echo%s, scheduler running; in another shell:\n"+
					"  jobs --redis %s enqueue echo hello\n  jobs --redis %s inspect ID\n"+
					"  jobs --redis %s cron add tick '@every 5s' echo hi\n"+
					"Ctrl-C stops.\n", strings.Join(append([]string{""}, c.StringSlice("run")...), ", "), url, url, url)
				err := <-done
				stop()
				<-done
				return err
			}
			err = runDemo(ctx, client, e.stdout)
			stop()
			<-done
			<-done
			if err == nil {
				fmt.Fprintf(e.stdout, "\nThat was the whole lifecycle. Keep a server up with `jobs dev` and use\n"+
					"`jobs enqueue`, `jobs worker --run TYPE=COMMAND` and `jobs inspect` against it.\n")
			}
			return err
		},
	}
}

// addRuns registers the handler of each --run TYPE=COMMAND flag on mux, and returns them:
// the caller gives them its client once connected (Exec.Client), for the dependencies of
// workflow jobs.
func addRuns(mux *worker.Mux, flags []string) ([]*worker.Exec, error) {
	var execs []*worker.Exec
	for _, r := range flags {
		typ, h, err := parseRun(r)
		if err != nil {
			return nil, err
		}
		if contains(mux.Types(), typ) {
			return nil, usagef("--run: job type %q given twice (it is already handled)", typ)
		}
		mux.Handle(typ, h)
		execs = append(execs, h)
	}
	return execs, nil
}

// parseCrons reads --cron 'NAME SPEC TYPE [PAYLOAD]' flags.
func parseCrons(flags []string) ([]cron.Entry, error) {
	var entries []cron.Entry
	for _, s := range flags {
		entry, err := cron.ParseEntry(s)
		if err != nil {
			return nil, usagef("--cron: %v", err)
		}
		entries = append(entries, entry)
	}
	return entries, nil
}

// checkPrograms refuses a --run whose program cannot be found or run (runs[i] gave
// execs[i]): every job of its type would fail and go dead. It looks the program up as
// os/exec will when a job runs it: in PATH, or as a path relative to this directory. It
// comes after the other usage checks, so a bad flag is named before a missing program.
func checkPrograms(runs []string, execs []*worker.Exec) error {
	for i, h := range execs {
		if _, err := exec.LookPath(h.Args[0]); err != nil {
			typ, _, _ := strings.Cut(runs[i], "=")
			why := "not found"
			if st, serr := os.Stat(h.Args[0]); serr == nil && st.IsDir() && strings.Contains(h.Args[0], "/") {
				why = "is a directory"
			} else if errors.Is(err, fs.ErrPermission) {
				why = "not executable"
			}
			return usagef("--run %s: program %s %s", typ, h.Args[0], why)
		}
	}
	return nil
}

// parseRun reads one --run TYPE=COMMAND flag.
func parseRun(flag string) (string, *worker.Exec, error) {
	typ, command, ok := strings.Cut(flag, "=")
	if !ok || typ == "" || strings.TrimSpace(command) == "" {
		return "", nil, usagef("--run %q: want TYPE=COMMAND", flag)
	}
	h, err := worker.NewExec(command)
	if err != nil {
		return "", nil, usagef("--run %q: %v", flag, err)
	}
	return typ, h, nil
}

// demoHandlers are the job types of `jobs dev --demo`.
func demoHandlers() map[string]worker.Handler {
	upper, _ := worker.NewExec("tr a-z A-Z")
	return map[string]worker.Handler{
		"demo:upper": upper, // an exec handler, as `--run demo:upper='tr a-z A-Z'` makes
		"demo:flaky": worker.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			if j.Attempt == 1 {
				return errors.New("simulated outage on the first attempt")
			}
			worker.SetResult(ctx, []byte("worked on attempt 2"))
			return nil
		}),
		"demo:broken": worker.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			return fmt.Errorf("simulated bug (attempt %d)", j.Attempt)
		}),
	}
}

// runDemo enqueues one job of each kind and prints every state change until all are
// done or dead.
func runDemo(ctx context.Context, client *queue.Client, out io.Writer) error {
	type demoJob struct {
		label, typ, payload string
		opts                []queue.Option
	}
	demo := []demoJob{
		{"runs at once", "echo", "hello from jobs", nil},
		{"exec handler", "demo:upper", "shout this", nil},
		{"delayed 2s", "echo", "I waited", []queue.Option{queue.Delay(2 * time.Second)}},
		{"fails, then retries", "demo:flaky", "", nil},
		{"dead after 2 tries", "demo:broken", "", []queue.Option{queue.MaxRetry(1)}},
	}
	start := time.Now()
	ids := make([]string, len(demo))
	for i, d := range demo {
		id, err := client.Enqueue(ctx, d.typ, []byte(d.payload), d.opts...)
		if err != nil {
			return err
		}
		ids[i] = id
	}
	// The scheduler's demo-tick entry fires every second; follow its next tick's job.
	every := cron.Entry{Spec: "@every 1s"}
	demo = append(demo, demoJob{label: "cron, @every 1s", typ: "echo"})
	ids = append(ids, cron.JobID("demo-tick", every.Next(time.Now())))
	fmt.Fprintf(out, "Enqueued %d jobs, and a cron entry fires every second; watching them move\n"+
		"(states: scheduled, ready, active, retry, done, dead):\n\n", len(ids)-1)
	last := make([]string, len(ids))
	finished := 0
	deadline := time.After(30 * time.Second)
	for finished < len(ids) {
		for i, id := range ids {
			j, err := client.Get(ctx, queue.DefaultQueue, id)
			if errors.Is(err, queue.ErrNotFound) {
				continue // a cron tick not fired yet
			}
			if err != nil {
				return err
			}
			seen := fmt.Sprintf("%s/%d", j.State, j.Attempt)
			if seen == last[i] {
				continue
			}
			last[i] = seen
			note := ""
			switch j.State {
			case queue.StateDone:
				note = fmt.Sprintf("result %q", j.Result)
				finished++
			case queue.StateDead:
				note = "last error: " + j.LastError
				finished++
			case queue.StateRetry:
				note = fmt.Sprintf("error %q, retry in %s", j.LastError, time.Until(j.RunAt).Round(100*time.Millisecond))
			case queue.StateScheduled:
				note = "due in " + time.Until(j.RunAt).Round(100*time.Millisecond).String()
			case queue.StateActive:
				note = fmt.Sprintf("attempt %d", j.Attempt)
			}
			fmt.Fprintf(out, "  %6.2fs  %-20s %-12s %-9s %s\n", time.Since(start).Seconds(),
				demo[i].label, j.Type, j.State, note)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errors.New("demo: jobs did not finish within 30s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "\nAll %d jobs finished in %.1fs.\n", len(ids), time.Since(start).Seconds())
	return nil
}
