package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
			"known queue, and the queues created while it runs (the queue set is read every 2s).\n" +
			"Each queue keeps about --events (global flag, default 10000) stream entries, each one\n" +
			"call's events (one job's transition, or a worker's batch of acks and claims).\n" +
			"Every --json line carries a cursor: `--since CURSOR` resumes right after that line (an\n" +
			"event inside an entry has ID/k: after the entry's first k events); with no QUEUE, a\n" +
			"queue the cursor does not name (created since) is read from its start.\n" +
			"--since takes a cursor, an entry ID, 0 (everything kept) or a duration (1h: the last hour).\n" +
			"A lost connection or a Redis restart does not end it: it says so once on stderr, retries\n" +
			"(every 0.1s, doubling up to 5s) and resumes after the last event it read.\n" +
			"Exit codes: 0 interrupted (SIGINT, SIGTERM); 1 a reader that fell behind what the stream\n" +
			"keeps (the error names the gap and the cursor to go on from), Redis unreachable at start,\n" +
			"or no queue to follow yet; 2 bad flags or arguments.\n" +
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
			from, resumeFrom := since, ""
			if isDuration {
				now, err := rdb.Time(c.Context).Result()
				if err != nil {
					return err
				}
				// A time (no "-seq"): the events from then on, whatever the streams hold.
				from = strconv.FormatInt(now.Add(-d).UnixMilli(), 10)
			} else if from == "" || from == "$" {
				// New events only; should Redis fail before the first one, the retry reads
				// from this time on, so nothing committed meanwhile is missed.
				now, err := rdb.Time(c.Context).Result()
				if err != nil {
					return err
				}
				resumeFrom = strconv.FormatInt(now.UnixMilli(), 10)
			}
			return followEvents(c, e, client, queues, from, resumeFrom)
		},
	}
}

// tailRetryMax bounds the pause between two attempts of a tail whose Redis failed: it
// doubles from tailRetryMin, so a restart of a few seconds is caught up within about
// tailRetryMax of its end, at one connection attempt per tailRetryMax while it lasts.
const (
	tailRetryMin = 100 * time.Millisecond
	tailRetryMax = 5 * time.Second
)

// followEvents prints the events of queues from from until interrupted. A Redis error (a
// restart, a lost connection) does not end it: it says so once on stderr, retries with a
// backoff, and resumes from the cursor of the last event it read (resumeFrom before the
// first, or from itself when that is ""), so each event the streams still hold is
// printed once. It ends on a signal (nil), a gap (the reader fell behind the stream), a
// bad cursor, or a failed write to stdout.
func followEvents(c *cli.Context, e *env, client *queue.Client, queues []string, from, resumeFrom string) error {
	typ := c.String("type")
	cursor := cmp.Or(resumeFrom, from)
	delay := tailRetryMin
	outage := false
	for first := true; ; first = false {
		if !first {
			from = cursor
		}
		var failed error
		for ev, err := range client.Events(c.Context, queues, from) {
			if err != nil {
				failed = err
				break
			}
			cursor, outage, delay = ev.Cursor, false, tailRetryMin
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
		switch {
		case c.Context.Err() != nil || failed == nil:
			return nil // interrupted: the normal end of a tail
		case errors.Is(failed, queue.ErrEventsGap), errors.Is(failed, queue.ErrInvalid):
			return failed
		case first && !isRedisFailure(failed):
			return failed // not a Redis failure (no queue to follow yet): a retry would not change it
		}
		if !outage {
			fmt.Fprintf(e.stderr, "jobs: tail: %s (retrying, resuming after the last event read)\n", oneLine(failed.Error()))
			outage = true
		}
		select {
		case <-c.Context.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, tailRetryMax)
	}
}

// isRedisFailure reports whether err comes from reaching Redis (a refused or lost
// connection, a timeout, a Redis error reply such as LOADING) rather than from what
// was asked of it.
func isRedisFailure(err error) bool {
	var re redis.Error
	var ne net.Error
	return errors.As(err, &re) || errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout)
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
