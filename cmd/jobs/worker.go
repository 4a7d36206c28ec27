package main

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

func workerCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run jobs until SIGTERM/SIGINT",
		Description: "Each --run TYPE=COMMAND runs COMMAND for jobs of TYPE: the command line is split\n" +
			"into words like a shell does (quotes honoured, nothing expanded) and run directly, never\n" +
			"through a shell; use sh -c '...' for pipes or variables; a program not found at start is\n" +
			"refused (exit 2). The program gets the payload on\n" +
			"stdin and JOB_ID, JOB_TYPE, JOB_QUEUE, JOB_ATTEMPT and JOB_LIMIT_KEY in its environment\n" +
			"(a workflow job also JOB_AFTER, its dependencies, JOB_DEPENDENCIES, their states and\n" +
			"results as JSON, and JOB_BATCH), and may report progress by writing lines\n" +
			"\"PERCENT [MESSAGE]\" to file descriptor 3 (JOB_PROGRESS_FD; bad lines are ignored;\n" +
			"jobs inspect shows the latest). Exit 0 succeeds (stdout, up to 1 MiB, is the result),\n" +
			"75 asks for a retry, 76 snoozes the job and 77 pauses its limit key for the delay on\n" +
			"stdout's last line (30s, 5m) without counting the attempt, anything else fails (stderr's\n" +
			"last 4 KiB is the error). At the job's timeout its process group is killed, and a\n" +
			"worker killed with SIGKILL takes the running programs' process groups with it (a\n" +
			"/bin/sh guard kills them once the worker is gone). On SIGTERM or SIGINT the\n" +
			"worker stops claiming, lets running jobs finish within --shutdown-timeout, hands the\n" +
			"rest back to their queue, and exits 0. Examples:\n\n" +
			"   jobs worker --run 'email=./send-email.sh'\n" +
			"   jobs worker --queue critical=6 --queue default=3 --queue low=1 --concurrency 20 \\\n" +
			"       --run 'resize=convert - -resize 50% -' --run \"report=sh -c 'make-report > /tmp/r'\"\n" +
			"   jobs worker --run \"import=sh -c 'echo 10 reading >&3; ./import; echo 100 done >&3'\"",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "run", Usage: "TYPE=COMMAND: run COMMAND for jobs of TYPE (repeatable)"},
			&cli.StringSliceFlag{Name: "queue", Usage: "NAME[=WEIGHT]: a queue to work on and its weight, 1 to 1000 (repeatable; default: default)"},
			&cli.IntFlag{Name: "concurrency", Value: worker.DefaultConcurrency, Usage: "jobs run at once"},
			&cli.DurationFlag{Name: "lease", Value: worker.DefaultLease, Usage: "claim length, renewed while a job runs; a crashed worker's jobs return after about this long"},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: worker.DefaultShutdownTimeout, Usage: "on SIGTERM, how long running jobs may finish before they are handed back"},
			&cli.DurationFlag{Name: "abandon-grace", Value: worker.DefaultAbandonGrace, Usage: "how long a handler may take to return once its job is cancelled or timed out; then it is abandoned and the attempt fails"},
			&cli.DurationFlag{Name: "done-retention", Value: queue.DefaultDoneRetention, Usage: "how long a done job stays readable (negative: deleted at once)"},
			&cli.DurationFlag{Name: "dead-retention", Value: queue.DefaultDeadRetention, Usage: "how long a dead job stays in the dead set"},
			&cli.IntFlag{Name: "dead-max", Value: queue.DefaultDeadMax, Usage: "most dead jobs kept per queue (oldest go first)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.DurationFlag{Name: "history-interval", Value: worker.DefaultHistoryInterval, Usage: "how often the worker adds what it ran to the metrics history in Redis (jobs stats --history); 0 turns it off"},
			beatFlag,
			metricsFlag,
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("worker takes no arguments, got %q", c.Args().First())
			}
			mux := worker.NewMux()
			runs := c.StringSlice("run")
			if len(runs) == 0 {
				return usagef("worker needs at least one --run TYPE=COMMAND")
			}
			execs, err := addRuns(mux, runs)
			if err != nil {
				return err
			}
			queues, err := parseQueues(c.StringSlice("queue"))
			if err != nil {
				return err
			}
			logger, err := newLogger(e, c.String("log-level"))
			if err != nil {
				return err
			}
			if c.Int("concurrency") <= 0 {
				return usagef("--concurrency %d: must be at least 1", c.Int("concurrency"))
			}
			if c.Duration("lease") < time.Second {
				return usagef("--lease %s: must be at least 1s", c.Duration("lease"))
			}
			if err := checkBeat(c); err != nil {
				return err
			}
			if c.Duration("abandon-grace") <= 0 {
				return usagef("--abandon-grace %s: must be positive", c.Duration("abandon-grace"))
			}
			if c.Duration("done-retention") == 0 || c.Duration("dead-retention") <= 0 || c.Int("dead-max") <= 0 {
				return usagef("--done-retention must be non-zero, --dead-retention and --dead-max positive")
			}
			if err := checkPrograms(runs, execs); err != nil {
				return err
			}
			client, err := connect(c, queue.Config{DoneRetention: c.Duration("done-retention"),
				DeadRetention: c.Duration("dead-retention"), DeadMax: c.Int("dead-max")})
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			for _, e := range execs {
				e.Client = client
			}
			if err := checkRunTypes(client, mux); err != nil {
				return err
			}
			reg, stop, err := startMetrics(c.String("metrics"), client, logger)
			if err != nil {
				return err
			}
			defer stop()
			history := c.Duration("history-interval")
			if history < 0 {
				return usagef("--history-interval %s: must not be negative (0 turns the history off)", history)
			}
			if history == 0 {
				history = -1 // worker.Config: negative is off, zero the default
			}
			w, err := worker.New(client, worker.Config{
				HistoryInterval: history,
				Registerer:      reg,
				Handler:         mux,
				Queues:          queues,
				Concurrency:     c.Int("concurrency"),
				Lease:           c.Duration("lease"),
				ShutdownTimeout: c.Duration("shutdown-timeout"),
				AbandonGrace:    c.Duration("abandon-grace"),
				Beat:            c.Duration("beat"),
				Logger:          logger,
			})
			if err != nil {
				return usagef("%v", err)
			}
			// The worker's own start line names queues and settings; an operator also
			// needs to see which job types this process runs.
			logger.LogAttrs(c.Context, slog.LevelInfo, "worker handles job types",
				slog.String("types", strings.Join(slices.Sorted(slices.Values(mux.Types())), ",")))
			return w.Run(c.Context)
		},
	}
}

// beatFlag is --beat of worker and scheduler: how often the process renews its entry in
// the registry (`jobs workers`).
var beatFlag = &cli.DurationFlag{Name: "beat", Value: worker.DefaultBeat,
	Usage: "how often this process renews its entry in the list of jobs workers (one Redis call); killed, it leaves the list within 3 beats, and quiet or stop orders are obeyed within one"}

func checkBeat(c *cli.Context) error {
	if c.Duration("beat") < 100*time.Millisecond {
		return usagef("--beat %s: must be at least 100ms", c.Duration("beat"))
	}
	return nil
}

// parseQueues reads --queue NAME[=WEIGHT] flags.
func parseQueues(flags []string) (map[string]int, error) {
	queues := map[string]int{}
	for _, f := range flags {
		name, weight, hasWeight := strings.Cut(f, "=")
		if err := checkQueueFlag(name); err != nil {
			return nil, err
		}
		w := 1
		if hasWeight {
			n, err := strconv.Atoi(weight)
			if err != nil || n <= 0 || n > worker.MaxWeight {
				return nil, usagef("--queue %q: weight must be an integer from 1 to %d", f, worker.MaxWeight)
			}
			w = n
		}
		if _, dup := queues[name]; dup {
			return nil, usagef("--queue %q: queue given twice", name)
		}
		queues[name] = w
	}
	if len(queues) == 0 {
		queues[queue.DefaultQueue] = 1
	}
	return queues, nil
}

// checkRunTypes refuses a --run type that no job can have ('x ', 'a b'): its handler
// would never run. The rule is Enqueue's, applied by client.Check, which touches no
// Redis.
func checkRunTypes(client *queue.Client, mux *worker.Mux) error {
	for _, typ := range slices.Sorted(slices.Values(mux.Types())) {
		if err := client.Check(queue.BatchJob{Type: typ}); err != nil {
			return usagef("--run: %s (no job can have this type)", strings.TrimPrefix(err.Error(), queue.ErrInvalid.Error()+": "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
