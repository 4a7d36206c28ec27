package main

import (
	"errors"
	"fmt"
	"sort"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func batchCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "batch",
		Usage: "batches of jobs with callbacks (created with jobs enqueue --file F --batch)",
		Subcommands: []*cli.Command{{
			Name:      "inspect",
			Usage:     "show a batch: state, counts, callbacks",
			ArgsUsage: "ID",
			Description: "Looks in every queue unless --queue is given. States: creating, running,\n" +
				"succeeded (every job done), completed (every job ended, some dead). Example:\n\n" +
				"   jobs batch inspect --json 01JEXAMPLE0000000000000000 | jq .pending",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "queue", Usage: "the batch's queue (default: search all queues)"},
				&cli.BoolFlag{Name: "json", Usage: `print {"id","queue","state","total","pending","done","dead","callbacks"}`},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 || c.Args().First() == "" {
					return usagef("batch inspect takes one batch ID, got %d arguments", c.NArg())
				}
				client, err := connect(c)
				if err != nil {
					return err
				}
				defer broker.Of(client).Redis().Close()
				var st *queue.BatchStatus
				id, q := c.Args().First(), c.String("queue")
				if q != "" {
					st, err = client.BatchStatus(c.Context, queue.BatchRef{Queue: q, ID: id})
				} else {
					st, err = client.FindBatch(c.Context, id)
				}
				switch {
				case errors.Is(err, queue.ErrNotFound) && q != "":
					return fmt.Errorf("no batch %s in queue %s", shown(id), q)
				case errors.Is(err, queue.ErrNotFound):
					return fmt.Errorf("no batch %s in any queue", shown(id))
				case err != nil:
					return err
				}
				if c.Bool("json") {
					return printJSON(e.stdout, st)
				}
				fmt.Fprintf(e.stdout, "id        %s\nqueue     %s\nstate     %s\ntotal     %d\npending   %d\ndone      %d\ndead      %d\n",
					clean(st.ID, false), st.Queue, st.State, st.Total, st.Pending, st.Done, st.Dead)
				kinds := make([]string, 0, len(st.Callbacks))
				for k := range st.Callbacks {
					kinds = append(kinds, k)
				}
				sort.Strings(kinds)
				for _, k := range kinds {
					cb := st.Callbacks[k]
					fired := "not fired"
					if cb.Fired {
						fired = "fired: job " + clean(cb.Job, false)
					}
					fmt.Fprintf(e.stdout, "on %-9s%s (%s)\n", k, clean(cb.Type, false), fired)
				}
				return nil
			},
		}},
	}
}
