package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func limitCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "limit",
		Usage: "set, list and remove a queue's concurrency and rate limits, obeyed by every worker",
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "set limits of a queue (those not given are kept); workers apply them at their next claim",
				ArgsUsage: "QUEUE",
				Description: "--concurrency N: at most N of the queue's jobs run at once, across all workers\n" +
					"(jobs a worker claimed ahead count; a dead worker's slots return when its leases expire).\n" +
					"--rate N/PERIOD: at most N job starts (retries included) per PERIOD, evenly spaced;\n" +
					"with --burst B, up to B at once and at most N+B-1 in any PERIOD (GCRA). Above about\n" +
					"100/s give a burst of about N/100: each start without one is a claim of its own.\n" +
					"PERIOD is a duration (500ms, 10s, 1m) or a unit (s, m, h). Examples:\n\n" +
					"   jobs limit set exports --concurrency 5\n" +
					"   jobs limit set payments --rate 100/s --burst 20",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "concurrency", Usage: "at most `N` jobs of the queue running at once"},
					&cli.StringFlag{Name: "rate", Usage: "at most `N/PERIOD` job starts, such as 20/s or 1000/1m"},
					&cli.IntFlag{Name: "burst", Usage: "with --rate, up to `B` starts at once (default: 1)"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("limit set takes one queue name, got %d arguments", c.NArg())
					}
					var l queue.Limit
					if c.IsSet("concurrency") {
						if l.Concurrency = c.Int("concurrency"); l.Concurrency <= 0 {
							return usagef("--concurrency must be a positive integer, got %d (jobs limit rm --concurrency removes it)", l.Concurrency)
						}
					}
					if c.IsSet("rate") {
						n, period, err := queue.ParseRate(c.String("rate"))
						if err != nil {
							return usagef("--rate: %v", err)
						}
						l.Rate, l.Period = n, period
					}
					if c.IsSet("burst") {
						if !c.IsSet("rate") {
							return usagef("--burst needs --rate (the burst belongs to a rate)")
						}
						if l.Burst = c.Int("burst"); l.Burst <= 0 {
							return usagef("--burst must be a positive integer, got %d", l.Burst)
						}
					}
					if l == (queue.Limit{}) {
						return usagef("limit set needs --concurrency, --rate or both")
					}
					client, err := connect(c)
					if err != nil {
						return err
					}
					defer broker.Of(client).Redis().Close()
					err = client.SetLimit(c.Context, c.Args().First(), l)
					if errors.Is(err, queue.ErrInvalid) {
						return usagef("%v", err)
					}
					return err
				},
			},
			{
				Name:  "ls",
				Usage: "list the queues' limits, running jobs, and what each waits on",
				Description: "RUNNING counts the queue's unexpired leases (what --concurrency counts). WAITING says\n" +
					"which limit holds its ready jobs back now, and UNTIL when the next may start at the latest.\n" +
					"Examples:\n\n   jobs limit ls\n   jobs limit ls --json | jq '.[] | select(.waiting != \"\")'",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array"}},
				Action: func(c *cli.Context) error {
					if c.NArg() > 0 {
						return usagef("limit ls takes no arguments, got %d", c.NArg())
					}
					client, err := connect(c)
					if err != nil {
						return err
					}
					defer broker.Of(client).Redis().Close()
					ls, err := client.Limits(c.Context)
					if err != nil {
						return err
					}
					if c.Bool("json") {
						rows := make([]limitRow, len(ls))
						for i, s := range ls {
							rows[i] = newLimitRow(s)
						}
						return printJSON(e.stdout, rows)
					}
					tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "QUEUE\tCONCURRENCY\tRATE\tBURST\tRUNNING\tWAITING\tUNTIL")
					for _, s := range ls {
						conc, rate, burst, until := "-", "-", "-", "-"
						if s.Concurrency > 0 {
							conc = fmt.Sprint(s.Concurrency)
						}
						if s.Rate > 0 {
							rate, burst = fmt.Sprintf("%d/%s", s.Rate, s.Period), fmt.Sprint(s.Burst)
						}
						if u := s.Until(); !u.IsZero() {
							until = u.UTC().Format("15:04:05.000")
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s.Queue, conc, rate, burst, s.Running,
							dash(string(s.Waiting())), until)
					}
					return tw.Flush()
				},
			},
			{
				Name:        "rm",
				Usage:       "remove a queue's limits (all, or those named); workers apply it at their next claim",
				ArgsUsage:   "QUEUE",
				Description: "Examples:\n\n   jobs limit rm exports\n   jobs limit rm payments --rate",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "concurrency", Usage: "remove only the concurrency limit"},
					&cli.BoolFlag{Name: "rate", Usage: "remove only the rate limit"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("limit rm takes one queue name, got %d arguments", c.NArg())
					}
					var kinds []queue.LimitKind
					if c.Bool("concurrency") {
						kinds = append(kinds, queue.ConcurrencyLimit)
					}
					if c.Bool("rate") {
						kinds = append(kinds, queue.RateLimit)
					}
					client, err := connect(c)
					if err != nil {
						return err
					}
					defer broker.Of(client).Redis().Close()
					err = client.RemoveLimit(c.Context, c.Args().First(), kinds...)
					if errors.Is(err, queue.ErrInvalid) {
						return usagef("%v", err)
					}
					return err
				},
			},
		},
	}
}

// limitRow is one queue of `jobs limit ls --json`: times in RFC 3339 (UTC), absent when
// there is none.
type limitRow struct {
	Queue       string     `json:"queue"`
	Concurrency int        `json:"concurrency"`
	Rate        int        `json:"rate"`
	PeriodMS    int64      `json:"period_ms"`
	Burst       int        `json:"burst"`
	Running     int        `json:"running"`
	Waiting     string     `json:"waiting"` // "concurrency", "rate" or ""
	Until       *time.Time `json:"until,omitempty"`
	NextSlot    *time.Time `json:"next_slot,omitempty"`
	NextToken   *time.Time `json:"next_token,omitempty"`
}

func newLimitRow(s queue.LimitStatus) limitRow {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	return limitRow{Queue: s.Queue, Concurrency: s.Concurrency, Rate: s.Rate, PeriodMS: s.Period.Milliseconds(),
		Burst: s.Burst, Running: s.Running, Waiting: string(s.Waiting()), Until: opt(s.Until()),
		NextSlot: opt(s.NextSlot), NextToken: opt(s.NextToken)}
}
