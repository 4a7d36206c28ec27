package main

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func inspectCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "show one job: state, attempts, times, progress, last error, result",
		ArgsUsage: "ID",
		Description: "Looks in every queue unless --queue is given; an ID found in several queues needs\n" +
			"--queue (IDs are unique per queue). Examples:\n\n" +
			"   jobs inspect 01JEXAMPLE0000000000000000\n" +
			"   jobs inspect --json 01JEXAMPLE0000000000000000 | jq .state",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "queue", Usage: "the job's queue (default: search all queues)"},
			&cli.BoolFlag{Name: "json", Usage: "print the job as one JSON object"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("inspect takes one job ID, got %d arguments", c.NArg())
			}
			id, err := jobIDArg(c)
			if err != nil {
				return err
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			job, err := findJob(c, client, id)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(e.stdout, job)
			}
			printJob(e.stdout, job)
			if len(job.After) > 0 {
				// What the job waits for, or waited for: each dependency's state now.
				deps, err := client.Dependencies(c.Context, job)
				if err != nil {
					return err
				}
				for _, d := range deps {
					st := string(d.State)
					if st == "" {
						st = "not found: purged, deleted or expired"
					}
					wait := ""
					if d.Pending {
						wait = "waits for it: "
					}
					fmt.Fprintf(e.stdout, "after       %s (%s%s)\n", clean(d.JobRef.String(), false), wait, st)
				}
			}
			if job.State != queue.StateDone && job.State != queue.StateDead {
				dependents, err := client.Dependents(c.Context, job)
				if err != nil {
					return err
				}
				for _, d := range dependents {
					fmt.Fprintf(e.stdout, "before      %s (depends on this job)\n", clean(d.String(), false))
				}
			}
			if !job.Batch.IsZero() {
				fmt.Fprintf(e.stdout, "batch       %s\n", clean(job.Batch.String(), false))
			}
			if job.State == queue.StateReady {
				// Say why a ready job is not running yet when its queue's limit holds it back.
				if ls, err := client.Limits(c.Context, job.Queue); err == nil && len(ls) == 1 && ls[0].Waiting() != "" {
					fmt.Fprintf(e.stdout, "waiting on  the queue's %s limit (%s, %d running) until %s\n",
						ls[0].Waiting(), ls[0].Limit, ls[0].Running, ls[0].Until().UTC().Format("2006-01-02 15:04:05.000 UTC"))
				}
			}
			return nil
		},
	}
}

func printJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
