package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func inspectCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "show one job: state, attempts, times, progress, last error, result",
		ArgsUsage: "ID | QUEUE/ID",
		Description: "Looks in every queue unless --queue is given; an ID found in several queues needs\n" +
			"--queue (IDs are unique per queue), or QUEUE/ID as --after and JOB_AFTER name jobs.\nExamples:\n\n" +
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
			why, desc, until := limitWait(c.Context, client, job)
			if c.Bool("json") {
				b, err := json.Marshal(job)
				if err != nil {
					return err
				}
				if why != "" {
					// The job's JSON, and what holds it back: waiting_on, waiting_until.
					u, _ := json.Marshal(until.UTC())
					b = append(b[:len(b)-1], fmt.Sprintf(`,"waiting_on":%q,"waiting_until":%s}`, why, u)...)
				}
				_, err = fmt.Fprintf(e.stdout, "%s\n", b)
				return err
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
				const shown = 50 // a job may have thousands: a sample of them, and the count
				dependents, total, err := client.Dependents(c.Context, job, shown)
				if err != nil {
					return err
				}
				for _, d := range dependents {
					st := string(d.State)
					if st == "" {
						st = "not found"
					}
					fmt.Fprintf(e.stdout, "before      %s (depends on this job; %s)\n", clean(d.String(), false), st)
				}
				if more := total - len(dependents); more > 0 {
					fmt.Fprintf(e.stdout, "before      and %d more (%d in all)\n", more, total)
				}
			}
			if !job.Batch.IsZero() {
				fmt.Fprintf(e.stdout, "batch       %s\n", clean(job.Batch.String(), false))
			}
			if why != "" {
				fmt.Fprintf(e.stdout, "waiting on  %s until %s\n", desc, until.UTC().Format("2006-01-02 15:04:05.000 UTC"))
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

// limitWait says why a ready job is not running yet when a limit holds it back
// (Client.LimitWaitOf); "" when none does, or the limits could not be read.
func limitWait(ctx context.Context, client *queue.Client, job *queue.Job) (why, desc string, until time.Time) {
	w, err := client.LimitWaitOf(ctx, job)
	if err != nil {
		return "", "", time.Time{}
	}
	return w.On, w.Desc, w.Until
}
