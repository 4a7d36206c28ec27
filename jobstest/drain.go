package jobstest

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// DrainTimeout bounds one Drain: a job that never finishes fails the test then.
var DrainTimeout = 30 * time.Second

// Drain runs a worker built from cfg (its Handler, usually the application's Mux) inside
// the test until no job of its queues (cfg.Queues, default "default") is ready, running,
// or due within dueSoon (100ms): then it stops the worker and returns the jobs it started, as they ended, in the
// order they first started. Jobs that failed and wait for a retry later, and jobs
// scheduled later, are left waiting; give cfg a BackoffFunc returning a millisecond to
// run retries to their end within the drain. Without cfg.Logger the worker's warnings
// and errors go to t's log.
//
// A job whose type cfg.Handler has no handler for (worker.ErrNoHandler) fails the test
// (t.Errorf naming the job and its type): the worker would postpone it, unrun, and the
// drain would end with it still waiting. Drain then stops at once and returns.
//
// Drain checks the queues every few milliseconds: it is a test helper, where simple
// beats clever; the worker it runs waits on its queues as in production.
func Drain(t testing.TB, c *queue.Client, cfg worker.Config) []*queue.Job {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = map[string]int{queue.DefaultQueue: 1}
	}
	var (
		mu        sync.Mutex
		started   []string
		seen      = map[string]bool{}
		unhandled []string // "type\x00queue\x00id" of jobs without a handler
	)
	next := cfg.Handler
	if next == nil {
		t.Fatal("jobstest: Drain needs cfg.Handler")
	}
	cfg.Handler = worker.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
		mu.Lock()
		if !seen[job.Queue+"\x00"+job.ID] {
			seen[job.Queue+"\x00"+job.ID] = true
			started = append(started, job.Queue+"\x00"+job.ID)
		}
		mu.Unlock()
		err := next.Process(ctx, job)
		if errors.Is(err, worker.ErrNoHandler) {
			mu.Lock()
			unhandled = append(unhandled, job.Type+"\x00"+job.Queue+"\x00"+job.ID)
			mu.Unlock()
		}
		return err
	})
	w, err := worker.New(c, cfg)
	if err != nil {
		t.Fatalf("jobstest: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()

	queues := make([]string, 0, len(cfg.Queues))
	for q := range cfg.Queues {
		queues = append(queues, q)
	}
	deadline := time.Now().Add(DrainTimeout)
	noHandler := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(unhandled) > 0
	}
	for !noHandler() && !settled(t, c, queues) {
		if time.Now().After(deadline) {
			stop()
			<-stopped
			t.Fatalf("jobstest: queues %v still have jobs ready, running or due after %s", queues, DrainTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if err := <-stopped; err != nil {
		t.Fatalf("jobstest: worker: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range unhandled {
		typ, rest, _ := strings.Cut(u, "\x00")
		q, id, _ := strings.Cut(rest, "\x00")
		t.Errorf("jobstest: job %s of %s, type %q: no handler in cfg.Handler; the worker postponed it, unrun", id, q, typ)
	}
	out := make([]*queue.Job, 0, len(started))
	for _, key := range started {
		q, id, _ := strings.Cut(key, "\x00")
		j, err := c.Get(context.Background(), q, id)
		if err != nil {
			t.Fatalf("jobstest: job %s of %s: %v", id, q, err)
		}
		out = append(out, j)
	}
	return out
}

// dueSoon is how far ahead Drain counts a waiting job as due: a retry a millisecond
// away is part of the drain, a job scheduled for later is not.
const dueSoon = 100 * time.Millisecond

// settled reports whether no job of queues is ready, active, or due soon in retry
// or scheduled, and no end of one is still to be delivered to another queue's workflow.
func settled(t testing.TB, c *queue.Client, queues []string) bool {
	t.Helper()
	ctx := context.Background()
	depths, err := c.Depths(ctx, queues)
	if err != nil {
		t.Fatalf("jobstest: %v", err)
	}
	soon := time.Now().Add(dueSoon)
	for _, q := range queues {
		if depths[q][queue.StateReady] > 0 || depths[q][queue.StateActive] > 0 {
			return false
		}
		// A workflow's end not yet told to a dependent or batch of another queue: the
		// worker delivers it, and the dependent may then be ready.
		if n, err := c.Undelivered(ctx, q); err != nil {
			t.Fatalf("jobstest: %v", err)
		} else if n > 0 {
			return false
		}
		for _, st := range []queue.State{queue.StateRetry, queue.StateScheduled} {
			if depths[q][st] == 0 {
				continue
			}
			first, err := c.List(ctx, q, st, 0, 1) // the one due soonest
			if err != nil {
				t.Fatalf("jobstest: %v", err)
			}
			// None listed though some were counted: it moved on since (promoted to
			// ready, say), so look again.
			if len(first) == 0 || first[0].RunAt.Before(soon) {
				return false
			}
		}
	}
	return true
}

// testLog writes a worker's log lines to the test's log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
