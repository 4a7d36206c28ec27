package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

// locate returns the queue and ID of job id: --queue when given, else the one queue
// holding it, or for QUEUE/ID that queue (see findJob).
func locate(c *cli.Context, client *queue.Client, id string) (string, string, error) {
	if q := c.String("queue"); q != "" {
		return q, id, nil
	}
	j, err := findJob(c, client, id)
	if err != nil {
		return "", "", err
	}
	return j.Queue, j.ID, nil
}

// findJob returns job id from --queue, or from the queue holding it. IDs are unique per
// queue only, so one ID may name jobs in several queues: acting on the first found would
// show, cancel or retry a job the operator may not have meant, so that is refused, naming
// the queues.
func findJob(c *cli.Context, client *queue.Client, id string) (*queue.Job, error) {
	if q := c.String("queue"); q != "" {
		j, err := client.Get(c.Context, q, id)
		if err != nil {
			return nil, jobError(id, err)
		}
		return j, nil
	}
	qs, err := client.Queues(c.Context)
	if err != nil {
		return nil, err
	}
	// One Get per queue, a few at a time: queue has no call that looks in every queue
	// and returns every match (Find stops at the first).
	found := make([]*queue.Job, len(qs))
	errs := make([]error, len(qs))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			found[i], errs[i] = client.Get(c.Context, q, id)
		}()
	}
	wg.Wait()
	var jobs []*queue.Job
	var in []string
	for i, j := range found {
		if err := errs[i]; err != nil && !errors.Is(err, queue.ErrNotFound) {
			return nil, err
		}
		if j != nil {
			jobs, in = append(jobs, j), append(in, qs[i])
		}
	}
	switch len(jobs) {
	case 0:
		// QUEUE/ID, as --after, JOB_AFTER and inspect's dependencies name jobs; only once
		// the whole argument named no job, since an ID may hold a '/'.
		if q, rest, ok := strings.Cut(id, "/"); ok && queue.ValidateQueue(q) == nil && rest != "" {
			if j, err := client.Get(c.Context, q, rest); err == nil {
				return j, nil
			} else if !errors.Is(err, queue.ErrNotFound) {
				return nil, err
			}
		}
		return nil, jobError(id, queue.ErrNotFound)
	case 1:
		return jobs[0], nil
	}
	return nil, usagef("job %s is in %d queues (%s): name one with --queue", shown(id), len(in), strings.Join(in, ", "))
}

// requireQueue fails unless a job was ever enqueued on q: a typo must not silently act
// on nothing.
func requireQueue(c *cli.Context, client *queue.Client, q string) error {
	return requireQueues(c, client, []string{q})
}

// requireQueues is requireQueue for several queues, read in one round trip.
func requireQueues(c *cli.Context, client *queue.Client, names []string) error {
	for _, q := range names {
		if err := queue.ValidateQueue(q); err != nil {
			return usagef("%v", err)
		}
	}
	qs, err := client.Queues(c.Context)
	if err != nil {
		return err
	}
	for _, q := range names {
		if !slices.Contains(qs, q) {
			return fmt.Errorf("no queue %q (no job was ever enqueued on it)", q)
		}
	}
	return nil
}

// jobError turns the queue package's not-found and wrong-state errors into messages.
func jobError(id string, err error) error {
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return fmt.Errorf("no job %s (never enqueued, or its retention ran out)", shown(id))
	case errors.Is(err, queue.ErrState):
		return fmt.Errorf("%v", err)
	}
	return err
}

func retryCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "retry",
		Usage:     "run a dead, retry or scheduled job now (a dead job gets a fresh attempt budget)",
		ArgsUsage: "ID | QUEUE/ID | --all-dead --queue Q",
		Description: "A job never runs before its dependencies succeeded (--after), also when retried: a dead\n" +
			"job that died waiting for them (cancelled, or one of them died) waits again for every\n" +
			"one not done, a dead one too (retry that one as well: the job runs once it is done, and\n" +
			"dies again if it dies again); --all-dead of a dead chain runs it in order. A dependency\n" +
			"whose record is gone (purged, deleted, expired) counts as dead: the job dies again at\n" +
			"once (exit 1). A job enqueued with --ignore-dependency-failure does not wait for a dead\n" +
			"one. A job that had started is ready at once. A dead unique job takes its unique key\n" +
			"back; when another job holds the key now, the retry is refused (exit 1) and the job\n" +
			"stays dead. A retried child of a batch runs, but its batch's counts and callbacks\n" +
			"stay as its first end left them. Examples:\n\n" +
			"   jobs retry 01JEXAMPLE0000000000000000\n" +
			"   jobs retry --all-dead --queue emails",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "queue", Usage: "the job's queue (default: search all), or the queue of --all-dead"},
			&cli.BoolFlag{Name: "all-dead", Usage: "retry every dead job of --queue"},
		},
		Action: func(c *cli.Context) error {
			all := c.Bool("all-dead")
			if all == (c.NArg() == 1) || c.NArg() > 1 {
				return usagef("retry takes one job ID, or --all-dead --queue Q")
			}
			if all && c.String("queue") == "" {
				return usagef("--all-dead needs --queue")
			}
			var id string
			if !all {
				var err error
				if id, err = jobIDArg(c); err != nil {
					return err
				}
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			if all {
				q := c.String("queue")
				if err := requireQueue(c, client, q); err != nil {
					return err
				}
				n, err := client.RetryAllDead(c.Context, q)
				if n > 0 || err == nil {
					fmt.Fprintf(e.stdout, "%d dead jobs of %s are ready again (or waiting for their dependencies)\n", n, q)
				}
				return err
			}
			q, id, err := locate(c, client, id)
			if err != nil {
				return err
			}
			if err := client.Retry(c.Context, q, id); err != nil {
				return jobError(id, err)
			}
			if j, err := client.Get(c.Context, q, id); err == nil {
				switch j.State {
				case queue.StateWaiting:
					fmt.Fprintf(e.stdout, "%s waits for its dependencies again\n", shown(id))
					return nil
				case queue.StateDead: // a dependency of it is gone: its link resolved it as dead
					return fmt.Errorf("retry %s: it died again at once: %s", shown(id), j.LastError)
				}
			}
			fmt.Fprintf(e.stdout, "%s is ready\n", shown(id))
			return nil
		},
	}
}

func cancelCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "cancel",
		Usage:     "cancel a job: a waiting job goes to dead; a running job's context is cancelled by its worker",
		ArgsUsage: "ID | QUEUE/ID",
		Description: "A running job is stopped by its worker within about a round trip (a pub/sub notice),\n" +
			"or at its next heartbeat if the notice was missed (a third of the lease, 10s by default);\n" +
			"the job then goes to dead. Dead jobs can be run again with `jobs retry`. Example:\n\n" +
			"   jobs cancel 01JEXAMPLE0000000000000000",
		Flags: []cli.Flag{&cli.StringFlag{Name: "queue", Usage: "the job's queue (default: search all)"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("cancel takes one job ID, got %d arguments", c.NArg())
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
			q, id, err := locate(c, client, id)
			if err != nil {
				return err
			}
			state, err := client.Cancel(c.Context, q, id)
			if err != nil {
				return jobError(id, err)
			}
			if state == queue.StateActive {
				fmt.Fprintf(e.stdout, "%s is running: its worker is told to stop it, and the job goes to dead\n", shown(id))
			} else {
				fmt.Fprintf(e.stdout, "%s cancelled (now dead)\n", shown(id))
			}
			return nil
		},
	}
}

func pauseCommands(e *env) []*cli.Command {
	// act does the change and says what it did.
	cmd := func(name, usage, desc string, flags []cli.Flag, act func(*cli.Context, *queue.Client, string) (string, error)) *cli.Command {
		return &cli.Command{
			Name: name, Usage: usage, ArgsUsage: "QUEUE", Flags: flags,
			Description: desc + "Example:\n\n   jobs " + name + " emails",
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usagef("%s takes one queue name, got %d arguments", name, c.NArg())
				}
				if c.IsSet("key") && c.String("key") == "" {
					return usagef("--key: the limit key is empty")
				}
				client, err := connect(c)
				if err != nil {
					return err
				}
				defer broker.Of(client).Redis().Close()
				q := c.Args().First()
				if err := requireQueue(c, client, q); err != nil {
					return err
				}
				said, err := act(c, client, q)
				if err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, said)
				return nil
			},
		}
	}
	return []*cli.Command{
		cmd("pause", "stop workers claiming from a queue (enqueues are still accepted)", "", nil,
			func(c *cli.Context, cl *queue.Client, q string) (string, error) {
				return q + " paused", cl.Pause(c.Context, q)
			}),
		cmd("resume", "let workers claim from a paused queue again, or from a limit key a handler paused",
			"With --key K: end a handler's pause of limit key K (worker.PauseKey, exit 77) before its\n"+
				"time; the key's jobs are claimed again at once, the paused one first. ",
			[]cli.Flag{&cli.StringFlag{Name: "key", Usage: "resume this limit key of the queue, not the queue"}},
			func(c *cli.Context, cl *queue.Client, q string) (string, error) {
				k := c.String("key")
				if k == "" {
					return q + " resumed", cl.Resume(c.Context, q)
				}
				was, err := cl.ResumeKey(c.Context, q, k)
				if err != nil || was {
					return fmt.Sprintf("limit key %s of %s resumed", clean(k, false), q), err
				}
				return fmt.Sprintf("limit key %s of %s is not paused: nothing to resume", clean(k, false), q), nil
			}),
	}
}

func purgeCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "purge",
		Usage:     "delete every job of a queue in one state (needs --yes)",
		ArgsUsage: "QUEUE",
		Description: "States: waiting, ready, scheduled, retry, done, dead (running jobs: use jobs cancel). Ready\n" +
			"includes the jobs of every limit key (--limit-key); a key whose jobs are all purged leaves the\n" +
			"keys the workers serve. Without --yes it says how many jobs it would delete. Example:\n\n" +
			"   jobs purge emails --state dead --yes",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state", Usage: "waiting, ready, scheduled, retry, done or dead (required)"},
			&cli.BoolFlag{Name: "yes", Usage: "really delete"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("purge takes one queue name, got %d arguments", c.NArg())
			}
			state, err := queue.ParseState(c.String("state"))
			if err != nil || state == queue.StateActive {
				return usagef("--state %q: want waiting, ready, scheduled, retry, done or dead", c.String("state"))
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			q := c.Args().First()
			if err := requireQueue(c, client, q); err != nil {
				return err
			}
			if !c.Bool("yes") {
				stats, err := client.Stats(c.Context)
				if err != nil {
					return err
				}
				n := int64(0)
				for _, s := range stats {
					if s.Name == q {
						n = map[queue.State]int64{queue.StateReady: s.Ready, queue.StateScheduled: s.Scheduled,
							queue.StateRetry: s.Retry, queue.StateDone: s.Done, queue.StateDead: s.Dead,
							queue.StateWaiting: s.Waiting}[state]
					}
				}
				return usagef("purge would delete %d %s jobs of %s: add --yes to do it", n, state, q)
			}
			n, err := client.Purge(c.Context, q, state)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "deleted %d %s jobs of %s\n", n, state, q)
			return nil
		},
	}
}

// jobIDArg is the job ID argument of inspect, retry and cancel: an empty one names no job
// and is a usage error, not a search of every queue for "".
func jobIDArg(c *cli.Context) (string, error) {
	id := c.Args().First()
	if id == "" {
		return "", usagef("%s: the job ID is empty", c.Command.Name)
	}
	return id, nil
}
