package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func workersCommand(e *env) *cli.Command {
	// done is the line printed once the order is given: what was asked, since the process
	// obeys it later, at its next beat.
	order := func(name, usage, desc, done string, send func(*queue.Client, *cli.Context, string) error) *cli.Command {
		return &cli.Command{
			Name: name, Usage: usage, ArgsUsage: "ID", Description: desc,
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usagef("workers %s takes one process ID (see jobs workers), got %d arguments", name, c.NArg())
				}
				id := c.Args().First()
				if id == "" {
					return usagef("workers %s: the process ID is empty", name)
				}
				client, err := connect(c)
				if err != nil {
					return err
				}
				defer broker.Of(client).Redis().Close()
				err = send(client, c, id)
				if errors.Is(err, queue.ErrNoProcess) {
					return fmt.Errorf("no live worker or scheduler %s (see jobs workers)", shown(id))
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, done+"\n", shown(id))
				return nil
			},
		}
	}
	return &cli.Command{
		Name:  "workers",
		Usage: "list the live workers and schedulers and what each runs; quiet or stop one",
		Description: "Every `jobs worker` and `jobs scheduler` (and Go worker or scheduler) renews its\n" +
			"entry every --beat (5s): one that is killed leaves the list within three beats, one\n" +
			"that stops cleanly at once. Under each worker, a \"running\" line per job it holds (those\n" +
			"claimed ahead included). Examples:\n\n" +
			"   jobs workers\n" +
			"   jobs workers --json | jq -r '.workers[] | select(.busy == 0) | .id'\n" +
			"   jobs workers quiet myhost:4242:ab12   # before a deploy: claim no more, finish the rest\n" +
			"   jobs workers stop myhost:4242:ab12    # as SIGTERM, from anywhere",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: `print {"workers":[{"id","kind","host","pid","version","queues","types","concurrency","busy","state","started_at","beat_at","running":[...]}]}`},
		},
		Subcommands: []*cli.Command{
			order("quiet", "tell a worker to claim no more jobs and finish its running ones (a scheduler: fire nothing)",
				"Obeyed at the process's next beat (within 5s by default); it stays quiet, still\n"+
					"renewing its running jobs' leases, until it is stopped. Example:\n\n"+
					"   jobs workers quiet myhost:4242:ab12",
				"told %s to be quiet: it claims no more jobs from its next beat and finishes its running ones",
				func(client *queue.Client, c *cli.Context, id string) error { return client.Quiet(c.Context, id) }),
			order("stop", "tell a worker or scheduler to shut down gracefully, as SIGTERM would",
				"Obeyed at the process's next beat (within 5s by default): a worker stops claiming,\n"+
					"lets running jobs finish within its --shutdown-timeout, hands back the rest and\n"+
					"exits 0. Example:\n\n"+
					"   jobs workers stop myhost:4242:ab12",
				"told %s to stop: it shuts down gracefully from its next beat",
				func(client *queue.Client, c *cli.Context, id string) error { return client.Stop(c.Context, id) }),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("workers takes no arguments but quiet ID or stop ID, got %q", c.Args().First())
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			ps, err := client.Processes(c.Context)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if ps == nil {
					ps = []*queue.Process{}
				}
				return printJSON(e.stdout, map[string]any{"workers": ps})
			}
			printProcesses(e.stdout, ps, time.Now())
			return nil
		},
	}
}

// printProcesses renders the registry for a person: one line per process, then its
// running jobs indented below it.
func printProcesses(w io.Writer, ps []*queue.Process, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tBUSY\tQUEUES\tHOST\tPID\tVERSION\tUP\tLAST BEAT")
	for _, p := range ps {
		var qs []string
		for _, q := range slices.Sorted(maps.Keys(p.Queues)) {
			qs = append(qs, fmt.Sprintf("%s=%d", q, p.Queues[q]))
		}
		busy := "-"
		if p.Kind == queue.KindWorker {
			busy = fmt.Sprintf("%d/%d", p.Busy, p.Concurrency)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", clean(p.ID, false), clean(p.Kind, false),
			clean(string(p.State), false), busy, dash(clean(strings.Join(qs, ","), false)), clean(p.Host, false), p.PID,
			dash(clean(p.Version, false)), age(now, p.StartedAt), age(now, p.BeatAt))
		for _, j := range p.Running {
			// No tab: a line's last cell does not widen the table's columns.
			fmt.Fprintf(tw, "  running %s %s on %s for %s\n", clean(j.ID, false), clean(j.Type, false),
				clean(j.Queue, false), age(now, j.StartedAt))
		}
	}
	if len(ps) == 0 {
		fmt.Fprintln(tw, "(no live workers or schedulers)")
	}
	tw.Flush()
}

// age is how long before now t was, rounded for reading; "-" for an unknown time.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}
