package main

import (
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func cronCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "cron",
		Usage: "add, list and remove the dynamic cron entries every `jobs scheduler` fires",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add or replace an entry; running schedulers pick it up within a second",
				ArgsUsage: "NAME SPEC TYPE [PAYLOAD]",
				Description: "SPEC is one argument: quote it. It is in UTC unless prefixed CRON_TZ=Area/City.\nExamples:\n\n" +
					"   jobs cron add nightly '0 0 3 * * *' report\n" +
					"   jobs cron add paris-morning 'CRON_TZ=Europe/Paris 0 0 8 * * MON-FRI' digest\n" +
					"   jobs cron add --queue low --exclusive --catch-up sync '@every 5m' sync:all",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "queue", Usage: "queue of the jobs (default: default)"},
					&cli.IntFlag{Name: "max-retry", DefaultText: strconv.Itoa(queue.DefaultMaxRetry), Usage: "retries of each job"},
					&cli.DurationFlag{Name: "timeout", DefaultText: queue.DefaultTimeout.String(), Usage: "limit of one attempt"},
					&cli.BoolFlag{Name: "exclusive", Usage: "never run two of its jobs at once: a tick while its last job is pending or running is skipped"},
					&cli.BoolFlag{Name: "catch-up", Usage: "on start, fire the latest tick missed while no scheduler ran"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() < 3 || c.NArg() > 4 {
						return usagef("cron add takes NAME SPEC TYPE [PAYLOAD], got %d arguments (quote SPEC)", c.NArg())
					}
					entry := cron.Entry{Name: c.Args().Get(0), Spec: c.Args().Get(1), Type: c.Args().Get(2),
						Payload: c.Args().Get(3), Queue: c.String("queue"), Timeout: c.Duration("timeout"),
						Exclusive: c.Bool("exclusive"), CatchUp: c.Bool("catch-up")}
					if c.IsSet("max-retry") {
						n := c.Int("max-retry")
						entry.MaxRetry = &n
					}
					if err := entry.Validate(); err != nil {
						return usagef("%v", err)
					}
					client, err := connect(c)
					if err != nil {
						return err
					}
					defer broker.Of(client).Redis().Close()
					err = cron.NewStore(client).Add(c.Context, entry)
					if errors.Is(err, cron.ErrInvalid) {
						// The job the entry would enqueue is refused: bad usage, like a bad spec.
						return usagef("%v", err)
					}
					return err
				},
			},
			{
				Name:        "ls",
				Usage:       "list the dynamic entries with their last and next tick",
				Description: "Examples:\n\n   jobs cron ls\n   jobs cron ls --json | jq -r '.[] | .name + \" \" + .next_tick'",
				Flags:       []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array"}},
				Action: func(c *cli.Context) error {
					client, err := connect(c)
					if err != nil {
						return err
					}
					defer broker.Of(client).Redis().Close()
					rows, listErr := cron.NewStore(client).Listing(c.Context, time.Now())
					if rows == nil && listErr != nil {
						return listErr
					}
					if c.Bool("json") {
						if err := printJSON(e.stdout, rows); err != nil {
							return err
						}
					} else {
						tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
						fmt.Fprintln(tw, "NAME\tSPEC\tTYPE\tQUEUE\tLAST TICK\tNEXT TICK")
						for _, r := range rows {
							last, next := "-", "-"
							if r.LastTick != nil {
								last = when(*r.LastTick)
							}
							if r.NextTick != nil {
								next = when(*r.NextTick)
							}
							fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Spec, r.Type,
								dash(r.Queue), last, next)
						}
						tw.Flush()
					}
					return listErr // broken entries are listed as an error after the good ones
				},
			},
			{
				Name:        "rm",
				Usage:       "remove an entry; running schedulers stop firing it within a second",
				ArgsUsage:   "NAME",
				Description: "Example:\n\n   jobs cron rm nightly",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("cron rm takes one entry name, got %d arguments", c.NArg())
					}
					client, err := connect(c)
					if err != nil {
						return err
					}
					defer broker.Of(client).Redis().Close()
					err = cron.NewStore(client).Remove(c.Context, c.Args().First())
					if errors.Is(err, cron.ErrNotFound) {
						return fmt.Errorf("no cron entry named %q (jobs cron ls lists them)", c.Args().First())
					}
					return err
				},
			},
		},
	}
}
