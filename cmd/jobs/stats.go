package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func statsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "stats",
		Usage: "count every queue's jobs by state, today's processed and failed attempts, live workers and latency",
		Description: "READY counts every ready job, the jobs of limit keys (--limit-key) included (--json:\n" +
			"keys_waiting, the keys with jobs ready). WORKERS counts the live workers claiming from the\n" +
			"queue (jobs workers lists them); LATENCY is the age of the queue's oldest ready job among\n" +
			"the next to be claimed (ready's next, the first limit key's next), since it\n" +
			"became due: growing with jobs ready, the queue needs more workers. WAITING ON names the\n" +
			"limit (jobs limit ls) that holds its ready jobs back now, and until when. --watch redraws every\n" +
			"second with the throughput since the last draw. --history prints, per queue, the\n" +
			"attempts processed and failed and the p50/p95 run and wait times (wait: from due to\n" +
			"start) from the metrics history workers keep in Redis: 1h per minute, 24h and 7d per\n" +
			"hour. Examples:\n\n" +
			"   jobs stats\n" +
			"   jobs stats --json | jq '.queues[] | select(.dead > 0)'\n" +
			"   jobs stats --json | jq '.queues[] | select(.latency_ms > 60000 or .workers == 0) | .name'\n" +
			"   jobs stats --history 1h --queue emails\n" +
			"   jobs stats --history 7d --json | jq '.queues[0].points[-1]'",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: `print {"queues":[{"name":...,"ready":...}]}`},
			&cli.BoolFlag{Name: "watch", Usage: "redraw every second until interrupted"},
			&cli.StringFlag{Name: "history", Usage: "1h, 24h or 7d: print the metrics history over that span"},
			&cli.StringSliceFlag{Name: "queue", Usage: "with --history: the queue to show (repeatable; default: every queue)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("stats takes no arguments, got %q", c.Args().First())
			}
			if c.IsSet("history") || c.IsSet("queue") {
				return historyAction(c, e)
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			tty := false
			if f, ok := e.stdout.(*os.File); ok {
				tty = isTerminal(f)
			}
			var prev map[string]int64
			var prevAt time.Time
			for {
				stats, err := client.Stats(c.Context)
				if err != nil && c.Bool("watch") && c.Context.Err() == nil {
					// A watch outlives a Redis restart: say so once a second and go on.
					fmt.Fprintf(e.stderr, "jobs: stats: %s (retrying)\n", oneLine(err.Error()))
					select {
					case <-c.Context.Done():
						return nil
					case <-time.After(time.Second):
					}
					continue
				}
				if err != nil {
					return err
				}
				now := time.Now()
				rates := map[string]float64{}
				if prev != nil {
					for _, s := range stats {
						rates[s.Name] = float64(s.ProcessedToday-prev[s.Name]) / now.Sub(prevAt).Seconds()
					}
				}
				if c.Bool("json") {
					if stats == nil {
						stats = []queue.QueueStats{}
					}
					b, _ := json.Marshal(map[string]any{"queues": stats})
					fmt.Fprintf(e.stdout, "%s\n", b)
				} else {
					if c.Bool("watch") && tty {
						fmt.Fprint(e.stdout, "\033[H\033[2J") // home and clear: redraw in place
					}
					printStats(e.stdout, stats, rates, c.Bool("watch"))
				}
				if !c.Bool("watch") {
					return nil
				}
				prev, prevAt = map[string]int64{}, now
				for _, s := range stats {
					prev[s.Name] = s.ProcessedToday
				}
				select {
				case <-c.Context.Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
}

// waitingOn is the WAITING ON column: the limit that holds the queue's ready jobs back,
// and until when (jobs limit ls shows the limits).
func waitingOn(s queue.QueueStats) string {
	if s.WaitingOn == "" {
		return "-"
	}
	return fmt.Sprintf("%s until %s", s.WaitingOn, clock(s.WaitingUntil))
}

func printStats(w io.Writer, stats []queue.QueueStats, rates map[string]float64, watch bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "QUEUE\tWAITING\tREADY\tSCHEDULED\tACTIVE\tRETRY\tDEAD\tDONE\tPAUSED\tPROCESSED TODAY\tFAILED TODAY\tWORKERS\tLATENCY\tWAITING ON\t"
	if watch {
		head += "JOBS/S\t"
	}
	fmt.Fprintln(tw, head)
	for _, s := range stats {
		paused := "no"
		if s.Paused {
			paused = "yes"
		}
		latency := "-"
		if s.Ready > 0 {
			latency = s.Latency.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t", s.Name, s.Waiting, s.Ready, s.Scheduled, s.Active,
			s.Retry, s.Dead, s.Done, paused, s.ProcessedToday, s.FailedToday, s.Workers, latency, waitingOn(s))
		if watch {
			if r, ok := rates[s.Name]; ok {
				fmt.Fprintf(tw, "%.0f\t", r)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	if len(stats) == 0 {
		fmt.Fprintln(tw, "(no queues yet)\t")
	}
	tw.Flush()
}
