package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

// historySpans are the spans `jobs stats --history` takes.
var historySpans = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

// historyAction is `jobs stats --history SPAN [--queue Q]... [--json]`.
func historyAction(c *cli.Context, e *env) error {
	if !c.IsSet("history") {
		return usagef("--queue goes with --history 1h|24h|7d")
	}
	span, ok := historySpans[c.String("history")]
	if !ok {
		return usagef("--history %q: want 1h, 24h or 7d", c.String("history"))
	}
	if c.Bool("watch") {
		return usagef("--history and --watch exclude each other")
	}
	for _, q := range c.StringSlice("queue") {
		if err := checkQueueFlag(q); err != nil {
			return err
		}
	}
	client, err := connect(c)
	if err != nil {
		return err
	}
	defer broker.Of(client).Redis().Close()
	names := c.StringSlice("queue")
	if len(names) == 0 {
		if names, err = client.Queues(c.Context); err != nil {
			return err
		}
	} else if err := requireQueues(c, client, names); err != nil {
		return err // a typo printed a span of zeros
	}
	hs := make([]*queue.History, 0, len(names))
	for _, q := range names {
		h, err := client.History(c.Context, q, span)
		if err != nil {
			return err
		}
		hs = append(hs, h)
	}
	if c.Bool("json") {
		return printJSON(e.stdout, map[string]any{"queues": hs})
	}
	for i, h := range hs {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		printHistory(e.stdout, h)
	}
	if len(hs) == 0 {
		fmt.Fprintln(e.stdout, "(no queues yet)")
	}
	return nil
}

// printHistory prints one queue's history as a table, a row per minute or hour.
func printHistory(w io.Writer, h *queue.History) {
	layout := "15:04"
	if h.Step >= time.Hour {
		layout = "01-02 15:04"
	}
	types := map[string]bool{}
	for _, p := range h.Points {
		for t := range p.Types {
			types[t] = true
		}
	}
	names := make([]string, 0, len(types))
	for t := range types {
		names = append(names, clean(t, false))
	}
	sort.Strings(names)
	fmt.Fprintf(w, "queue %s, per %s (UTC); job types: %s\n", clean(h.Queue, false), stepName(h.Step), dash(strings.Join(names, ",")))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TIME\tPROCESSED\tFAILED\tRUN P50\tRUN P95\tWAIT P50\tWAIT P95\t")
	row := func(label string, s queue.HistoryStats) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n", label, s.Processed, s.Failed,
			dur(s.RunP50), dur(s.RunP95), dur(s.WaitP50), dur(s.WaitP95))
	}
	for _, p := range h.Points {
		row(p.Start.Format(layout), p.HistoryStats)
	}
	row("total", h.Total)
	tw.Flush()
}

func stepName(d time.Duration) string {
	if d >= time.Hour {
		return "hour"
	}
	return "minute"
}

// dur prints a percentile, "-" when nothing ran.
func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}
