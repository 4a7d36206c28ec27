package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/errtext"
	"github.com/jobs-dev/jobs/queue"
)

func lsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list a queue's jobs in one state",
		ArgsUsage: "QUEUE",
		Description: "States: waiting, scheduled, ready, active, retry, done, dead. Ready jobs are listed in\n" +
			"claim order: those without a limit key, then each limit key's (--limit-key) in the order\n" +
			"the claims serve the keys; scheduled and retry by due time, dead and done most recent\n" +
			"first. LIMIT KEY is the job's limit key (- for none). Examples:\n\n" +
			"   jobs ls default --state dead\n" +
			"   jobs ls emails --state ready --limit 1000 --offset 1000 --json | jq -r '.[].id'",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state", Value: "ready", Usage: "waiting, scheduled, ready, active, retry, done or dead"},
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "most jobs to list"},
			&cli.IntFlag{Name: "offset", Usage: "jobs to skip, for paging"},
			&cli.BoolFlag{Name: "json", Usage: "print a JSON array of the jobs (the inspect --json objects)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("ls takes one queue name, got %d arguments", c.NArg())
			}
			state, err := queue.ParseState(c.String("state"))
			if err != nil {
				return usagef("--state: %v", err)
			}
			if c.Int("limit") <= 0 || c.Int("offset") < 0 {
				return usagef("--limit must be positive and --offset not negative")
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			q := c.Args().First()
			jobs, err := client.List(c.Context, q, state, c.Int("offset"), c.Int("limit"))
			if errors.Is(err, queue.ErrNotFound) {
				return fmt.Errorf("no queue %q (no job was ever enqueued on it)", q)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if jobs == nil {
					jobs = []*queue.Job{}
				}
				return printJSON(e.stdout, jobs)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTYPE\tSTATE\tLIMIT KEY\tATTEMPT\tCREATED\tRUN AT\tLAST ERROR")
			for _, j := range jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", clean(j.ID, false), clean(j.Type, false), j.State,
					dash(clean(j.LimitKey, false)), j.Attempt,
					j.MaxRetry+1, when(j.CreatedAt), when(j.RunAt), dash(truncate(clean(errtext.Summary(j.LastError), false), 60)))
			}
			return tw.Flush()
		},
	}
}
