package main

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
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
