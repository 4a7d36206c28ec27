package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/bench"
	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func benchCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure throughput, latency, delay precision or memory against --redis",
		Description: "Runs one measurement through the same APIs an application uses and prints one\n" +
			"line (--json: the benchmark contract's JSON object). Modes: " + strings.Join(bench.Modes(), ", ") + ".\n" +
			"Use a Redis (or --prefix) of its own: it adds and removes jobs there. Examples:\n\n" +
			"   jobs bench --mode process --n 30000 --concurrency 100\n" +
			"   jobs bench --mode process --n 30000 --queues 6 --backlog 1000000\n" +
			"   jobs bench --mode latency --n 200 --json",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mode", Value: bench.ModeProcess, Usage: "what to measure: " + strings.Join(bench.Modes(), ", ")},
			&cli.IntFlag{Name: "n", Value: 10000, Usage: "jobs (latency: samples)"},
			&cli.IntFlag{Name: "concurrency", Value: bench.DefaultConcurrency, Usage: "enqueuing goroutines, or worker concurrency"},
			&cli.IntFlag{Name: "payload", Value: 100, Usage: "payload bytes per job"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as one JSON object"},
			&cli.IntFlag{Name: "limit-concurrency", Usage: "set this concurrency limit on the run's queue (jobs limit set)"},
			&cli.StringFlag{Name: "limit-rate", Usage: "set this rate limit (`N/PERIOD`) on the run's queue"},
			&cli.IntFlag{Name: "limit-burst", Usage: "with --limit-rate, its burst"},
			&cli.IntFlag{Name: "limit-keys", Usage: "spread the jobs over `N` limit keys (jobs enqueue --limit-key)"},
			&cli.IntFlag{Name: "limit-key-concurrency", Usage: "set this key concurrency on the run's queue (jobs limit set --key-concurrency)"},
			&cli.StringFlag{Name: "limit-key-rate", Usage: "set this key rate (`N/PERIOD`) on the run's queue (jobs limit set --key-rate)"},
			&cli.IntFlag{Name: "limit-key-burst", Usage: "with --limit-key-rate, its burst"},
			&cli.IntFlag{Name: "queues", Value: 1, Usage: fmt.Sprintf("spread the jobs over `N` queues (1 to %d), round-robin; the worker serves them all (not in fanout)", bench.MaxQueues)},
			&cli.IntFlag{Name: "backlog", Usage: "keep `N` more jobs pending in the run's queues while it measures, untimed (process: ready behind its jobs; others: due in an hour), purged after (not in fanout)"},
			&cli.BoolFlag{Name: "history", Value: true, Usage: "keep the worker's metrics history (--history=false: measure its cost; --events 0 turns the events off)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("bench takes no arguments, got %q", c.Args().First())
			}
			limit := queue.Limit{Concurrency: c.Int("limit-concurrency"), Burst: c.Int("limit-burst"),
				KeyConcurrency: c.Int("limit-key-concurrency"), KeyBurst: c.Int("limit-key-burst")}
			if q := c.Int("queues"); q < 1 || q > bench.MaxQueues {
				return usagef("--queues must be from 1 to %d, got %d", bench.MaxQueues, q)
			}
			if c.Int("limit-keys") < 0 {
				return usagef("--limit-keys must be positive, got %d", c.Int("limit-keys"))
			}
			if c.IsSet("limit-rate") {
				n, period, err := queue.ParseRate(c.String("limit-rate"))
				if err != nil {
					return usagef("--limit-rate: %v", err)
				}
				limit.Rate, limit.Period = n, period
			}
			if c.IsSet("limit-key-rate") {
				n, period, err := queue.ParseRate(c.String("limit-key-rate"))
				if err != nil {
					return usagef("--limit-key-rate: %v", err)
				}
				limit.KeyRate, limit.KeyPeriod = n, period
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			events, _ := eventsFlag(c) // checked by connect
			broker.Of(client).Redis().Close()
			// A Redis client of its own, not connected yet, so that bench.Run's
			// queue.Client runs lone enqueues on their caller's goroutine, as an
			// application's would (see queue.NewClient).
			rdb, err := openRedis(targetOf(c))
			if err != nil {
				return err
			}
			defer rdb.Close()
			var progress io.Writer
			if f, ok := e.stderr.(*os.File); ok && isTerminal(f) {
				progress = f
			}
			rec, err := bench.Run(c.Context, rdb, c.String("prefix"), bench.Options{
				Mode: c.String("mode"), N: c.Int("n"), Concurrency: c.Int("concurrency"),
				Payload: c.Int("payload"), Progress: progress, Events: events,
				NoHistory: !c.Bool("history"), Limit: limit, LimitKeys: c.Int("limit-keys"),
				Queues: c.Int("queues"), Backlog: c.Int("backlog"),
			})
			if errors.Is(err, bench.ErrInvalid) || errors.Is(err, queue.ErrInvalid) {
				return usagef("%v", err)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(e.stdout, rec)
			}
			fmt.Fprintf(e.stdout, "%s n=%d c=%d", rec.Mode, rec.N, rec.C)
			if rec.Queues > 1 {
				fmt.Fprintf(e.stdout, " queues=%d", rec.Queues)
			}
			if rec.Backlog > 0 {
				fmt.Fprintf(e.stdout, " backlog=%d", rec.Backlog)
			}
			fmt.Fprintf(e.stdout, ": %.0f jobs/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms",
				rec.JobsPerS, rec.P50Ms, rec.P99Ms, rec.MaxMs)
			if rec.Mode == bench.ModeFanout {
				fmt.Fprintf(e.stdout, "; plain %.0f jobs/s (children %.2fx); dependent started p99 %.2f ms across queues; %.0f bytes/edge",
					rec.PlainJobsPerS, rec.Ratio, rec.P99CrossMs, rec.BytesPerEdge)
			}
			if rec.BytesPerJob > 0 {
				fmt.Fprintf(e.stdout, ", %.0f bytes/job", rec.BytesPerJob)
			}
			fmt.Fprintln(e.stdout)
			return nil
		},
	}
}

// isTerminal reports whether f is a character device (a terminal, not a pipe or file).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
