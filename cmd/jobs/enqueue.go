package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func enqueueCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "enqueue",
		Usage:     "add a job; prints its ID",
		ArgsUsage: "TYPE [PAYLOAD|-] | --file FILE",
		Description: "PAYLOAD is stored as given; - reads it from stdin. Examples:\n\n" +
			"   jobs enqueue email '{\"to\":\"ann@example.com\"}'\n" +
			"   jobs enqueue --delay 10m --queue reports report:daily\n" +
			"   jobs enqueue --id order-42 charge - < order.json   # exits 3 if order-42 exists\n" +
			"   jobs enqueue --unique-for 1h digest '{\"user\":7}'  # exits 3 and prints the first ID within the hour\n" +
			"   jobs enqueue ship '{\"order\":42}' --after $(jobs enqueue charge '{\"order\":42}') --after mail/01JEXAMPLE0000000000000000\n" +
			"   jobs enqueue --file rows.jsonl --batch --on-success report   # prints the batch ID\n" +
			"   jobs enqueue --file jobs.jsonl   # one JSON object per line, in batches of 1000:\n" +
			"     {\"type\":\"email\",\"payload\":{\"to\":\"ann\"},\"queue\":\"mail\",\"delay\":\"5m\",\"at\":\"...\",\"id\":\"...\",\n" +
			"      \"max_retry\":3,\"timeout\":\"1m\",\"unique_for\":\"1h\",\"unique_key\":\"...\",\"exclusive_key\":\"...\",\"limit_key\":\"...\"}",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "queue", Value: queue.DefaultQueue, Usage: "queue to put the job on (with --file: the lines without \"queue\")"},
			&cli.DurationFlag{Name: "delay", Usage: "run after this long (e.g. 30s, 5m)"},
			&cli.StringFlag{Name: "at", Usage: "run at this time (RFC 3339, e.g. 2026-12-24T18:00:00Z)"},
			&cli.IntFlag{Name: "max-retry", Value: queue.DefaultMaxRetry, Usage: "retries after the first attempt before the job is dead"},
			&cli.DurationFlag{Name: "timeout", Value: queue.DefaultTimeout, Usage: "limit of one attempt"},
			&cli.StringFlag{Name: "id", Usage: "explicit job ID; enqueuing an existing ID exits 3"},
			&cli.StringFlag{Name: "file", Usage: "enqueue the JSON lines of this file (- for stdin) instead of one job"},
			&cli.DurationFlag{Name: "unique-for", Usage: "reject (exit 3, printing the first job's ID) the same type+payload on this queue for this long, or until the first job finishes"},
			&cli.StringFlag{Name: "unique-key", Usage: "with --unique-for: the dedup key instead of type+payload"},
			&cli.BoolFlag{Name: "unique-until-expiry", Usage: "with --unique-for: keep the key for the whole duration, even after the job finishes"},
			&cli.BoolFlag{Name: "exclusive", Usage: "never run two jobs with the same exclusive key at once (key: the job type)"},
			&cli.StringFlag{Name: "exclusive-key", Usage: "the exclusive key (implies --exclusive)"},
			&cli.StringFlag{Name: "limit-key", Usage: "obey the queue's per-key limits under limit key `K` (jobs limit set --key-concurrency...)"},
			&cli.StringSliceFlag{Name: "after", Usage: "ID or QUEUE/ID: wait (state waiting) until that job has ended (repeatable); a dependency that dies kills this job too"},
			&cli.BoolFlag{Name: "ignore-dependency-failure", Usage: "with --after: run once the dependencies ended, even when one died"},
			&cli.BoolFlag{Name: "batch", Usage: "with --file: enqueue the file's jobs as one batch; prints the batch ID"},
			&cli.StringFlag{Name: "on-complete", Usage: "with --batch: a job of this TYPE on --queue when every job of the batch ended"},
			&cli.StringFlag{Name: "on-success", Usage: "with --batch: a job of this TYPE on --queue when every job of the batch is done"},
			&cli.StringFlag{Name: "on-death", Usage: "with --batch: a job of this TYPE on --queue when the first job of the batch died"},
		},
		Action: func(c *cli.Context) error {
			callbacks := c.IsSet("on-complete") || c.IsSet("on-success") || c.IsSet("on-death")
			if callbacks && !c.Bool("batch") {
				return usagef("--on-complete, --on-success and --on-death need --file and --batch")
			}
			if c.IsSet("file") {
				// --queue: the queue of the lines that name none (and of the batch and its
				// callbacks); with --batch, the batch's own flags.
				allowed := 1
				if c.IsSet("queue") {
					allowed++
				}
				if c.Bool("batch") {
					for _, f := range []string{"batch", "on-complete", "on-success", "on-death"} {
						if c.IsSet(f) {
							allowed++
						}
					}
				}
				if c.NArg() > 0 || c.NumFlags() > allowed {
					return usagef("--file takes no TYPE and no other flag but --queue, --batch and its callbacks: each line carries its own settings")
				}
				client, err := connect(c)
				if err != nil {
					return err
				}
				defer broker.Of(client).Redis().Close()
				if c.Bool("batch") {
					return enqueueFileBatch(c, e, client, c.String("file"))
				}
				return enqueueFile(c, e, client, c.String("file"))
			}
			if c.Bool("batch") {
				return usagef("--batch needs --file: a batch is the jobs of a file")
			}
			if c.NArg() < 1 || c.NArg() > 2 {
				return usagef("enqueue takes TYPE [PAYLOAD|-], got %d arguments", c.NArg())
			}
			typ := c.Args().Get(0)
			payload := []byte(c.Args().Get(1))
			if c.Args().Get(1) == "-" {
				var err error
				if payload, err = readPayload(e.stdin, queue.DefaultMaxPayload); err != nil {
					return err
				}
			}
			if err := jobConflict(func(f string) bool { return given(c, f) }, flagWord); err != nil {
				return err
			}
			opts := []queue.Option{queue.On(c.String("queue")), queue.MaxRetry(c.Int("max-retry")),
				queue.Timeout(c.Duration("timeout"))}
			if c.IsSet("delay") {
				opts = append(opts, queue.Delay(c.Duration("delay")))
			}
			if c.IsSet("at") {
				at, err := time.Parse(time.RFC3339, c.String("at"))
				if err != nil {
					return usagef("--at %q: want RFC 3339 time like 2026-12-24T18:00:00Z", c.String("at"))
				}
				opts = append(opts, queue.At(at))
			}
			if c.IsSet("id") {
				opts = append(opts, queue.ID(c.String("id")))
			}
			if c.IsSet("unique-for") {
				opts = append(opts, queue.Unique(c.Duration("unique-for")))
			}
			if c.IsSet("unique-key") {
				opts = append(opts, queue.UniqueKey(c.String("unique-key")))
			}
			if c.Bool("unique-until-expiry") {
				opts = append(opts, queue.UniqueUntilExpiry())
			}
			if c.Bool("exclusive") || c.IsSet("exclusive-key") {
				opts = append(opts, queue.Exclusive(c.String("exclusive-key")))
			}
			if c.IsSet("limit-key") {
				opts = append(opts, queue.LimitKey(c.String("limit-key")))
			}
			for _, a := range c.StringSlice("after") {
				if strings.HasPrefix(a, "/") {
					return usagef("--after %q: no queue before '/': want QUEUE/ID, or ID for a job on --queue", a)
				}
				ref, err := queue.ParseJobRef(a, c.String("queue"))
				if err != nil {
					return usagef("--after %q: %v", a, err)
				}
				opts = append(opts, queue.AfterJob(ref.Queue, ref.ID))
			}
			if c.Bool("ignore-dependency-failure") {
				opts = append(opts, queue.IgnoreDependencyFailure())
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			id, err := client.Enqueue(c.Context, typ, payload, opts...)
			if errors.Is(err, queue.ErrDuplicate) {
				fmt.Fprintln(e.stdout, id)
				return &exitCodeError{exitDuplicate, fmt.Errorf("duplicate: job %s already exists in queue %s", id, c.String("queue"))}
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, id)
			return nil
		},
	}
}

// readPayload reads a payload from r, at most limit bytes: it stops one byte past the
// limit, so a payload that is far too large is refused without being read whole.
func readPayload(r io.Reader, limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("read payload from stdin: %w", err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%w: stdin holds more than the limit of %d bytes", queue.ErrPayloadTooLarge, limit)
	}
	return b, nil
}
