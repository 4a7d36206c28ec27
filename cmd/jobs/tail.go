package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func tailCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "tail",
		Usage:     "follow the event stream of queues: every transition of every job, as it commits",
		ArgsUsage: "[QUEUE...]",
		Description: "Follows like tail -f (blocking reads, no polling) until interrupted; with no QUEUE, every\n" +
			"known queue. Each queue keeps about --events (global flag, default 10000) stream entries,\n" +
			"each one call's events (one job's transition, or a worker's batch of acks and claims).\n" +
			"Every --json line carries a cursor: `--since CURSOR` resumes right after that line (an\n" +
			"event inside an entry has ID/k: after the entry's first k events), and a reader\n" +
			"that fell behind what the stream keeps stops with an error (exit 1) naming the gap.\n" +
			"--since takes a cursor, an entry ID, 0 (everything kept) or a duration (1h: the last hour).\n" +
			"Examples:\n\n" +
			"   jobs tail emails\n" +
			"   jobs tail --json --since 1h | jq -c 'select(.event == \"dead\")'\n" +
			"   jobs tail --json --since \"$(tail -n1 events.jsonl | jq -r .cursor)\" >> events.jsonl",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "type", Usage: "only events of jobs of this `TYPE`"},
			&cli.BoolFlag{Name: "json", Usage: `print one object per line: {"queue","event","id","type","attempt","worker","error","at","cursor"}`},
			&cli.StringFlag{Name: "since", Usage: "start after `CURSOR`, at an entry ID, 0 for every event kept, or a DURATION ago (default: new events only)"},
		},
		Action: func(c *cli.Context) error {
			queues := c.Args().Slice()
			for _, q := range queues {
				if err := checkQueueArg(q); err != nil {
					return err
				}
			}
			since := strings.TrimSpace(c.String("since"))
			d, isDuration := sinceDuration(since)
			if !isDuration && !validCursor(since) {
				return usagef("--since %s: want a cursor (as --json prints), an entry ID, 0, or a duration such as 1h", shown(since))
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			rdb := broker.Of(client).Redis()
			defer rdb.Close()
			// A typo would wait for events that never come, without a word.
			if err := requireQueues(c, client, queues); err != nil {
				return err
			}
			from := since
			if isDuration {
				now, err := rdb.Time(c.Context).Result()
				if err != nil {
					return err
				}
				// A time (no "-seq"): the events from then on, whatever the streams hold.
				from = strconv.FormatInt(now.Add(-d).UnixMilli(), 10)
			}
			typ := c.String("type")
			for ev, err := range client.Events(c.Context, queues, from) {
				if err != nil {
					if c.Context.Err() != nil {
						return nil // interrupted: the normal end of a tail
					}
					return err
				}
				if typ != "" && ev.Type != typ {
					continue
				}
				if c.Bool("json") {
					if err := printJSON(e.stdout, ev); err != nil {
						return err
					}
					continue
				}
				printEvent(e.stdout, ev)
			}
			return nil
		},
	}
}

// sinceDuration reads --since as a duration ago ("1h", "90s"); "0" is not one (it is the
// oldest event kept).
func sinceDuration(s string) (time.Duration, bool) {
	if s == "" || s == "0" {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// validCursor reports whether s is a cursor queue.Client.Events takes: "", "$", "0", an
// entry ID (ms or ms-seq), an event's cursor inside an entry (ms-seq/k) or queue=ID pairs.
func validCursor(s string) bool {
	return queue.ValidateCursor(s) == nil
}

// checkQueueArg checks a queue name given as an argument, as checkQueueFlag does --queue
// (a leading '-' reads as a flag, so it is refused too).
func checkQueueArg(name string) error {
	if strings.HasPrefix(name, "-") {
		return usagef("queue %s: a queue name may not start with '-'", shown(name))
	}
	if err := queue.ValidateQueue(name); err != nil {
		return usagef("queue %s: %v", shown(name), err)
	}
	return nil
}

// printEvent writes one event for a person, on one line: time, queue, event, job ID and
// type, then what the event has of attempt, worker and error. Values from users and
// handlers go through clean, so no byte of theirs can drive the terminal.
func printEvent(w io.Writer, ev queue.Event) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  %-11s", when(ev.At), clean(ev.Queue, false), ev.Name)
	if ev.ID != "" {
		fmt.Fprintf(&b, "  %s  %s", clean(ev.ID, false), clean(ev.Type, false))
	}
	if ev.Attempt > 0 {
		fmt.Fprintf(&b, "  attempt %d", ev.Attempt)
	}
	if ev.Worker != "" {
		fmt.Fprintf(&b, "  worker %s", clean(ev.Worker, false))
	}
	if ev.Error != "" {
		fmt.Fprintf(&b, "  error: %s", clean(ev.Error, false))
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}
