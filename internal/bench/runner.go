package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// runner is a worker.Worker of the run, on the run's queue, whose handler does nothing
// but note when each job started.
type runner struct {
	b       *bench
	fn      func(i int, job *queue.Job, start time.Time)
	cancel  context.CancelFunc
	result  chan error // Run's return
	reached chan struct{}
	warm    chan struct{}
	once    sync.Once // closes warm
	stopped sync.Once
	err     error // Run's return, once stopped

	mu     sync.Mutex
	n      int      // handler calls, warm-up job excluded
	target int      // reached is closed at the target-th call; 0: never
	refs   []jobRef // refs[i]: the i-th job to start, for i < len(refs)
}

// jobRef names one job: its queue and ID.
type jobRef struct{ queue, id string }

// startWorker starts a worker of the given concurrency on every queue of the run, each
// of weight 1. fn, when not nil, is called from
// the handler with the job's start index (0, 1, ... in start order; an index past the
// expected count means a job ran twice, which at-least-once delivery allows), the job, and
// the time the handler started; it runs concurrently with itself.
func (b *bench) startWorker(ctx context.Context, concurrency, target int, refs []jobRef,
	fn func(i int, job *queue.Job, start time.Time)) (*runner, error) {
	r := &runner{b: b, fn: fn, result: make(chan error, 1), reached: make(chan struct{}),
		warm: make(chan struct{}), target: target, refs: refs}
	var history time.Duration // the default
	if b.o.NoHistory {
		history = -1
	}
	weights := make(map[string]int, len(b.queues))
	for _, q := range b.queues {
		weights[q] = 1
	}
	w, err := worker.New(b.client, worker.Config{
		Handler:         worker.HandlerFunc(r.process),
		Queues:          weights,
		Concurrency:     concurrency,
		Logger:          slog.New(errorsOnly{slog.Default().Handler()}),
		HistoryInterval: history,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	ctx, r.cancel = context.WithCancel(ctx)
	go func() { r.result <- w.Run(ctx) }()
	return r, nil
}

func (r *runner) process(_ context.Context, job *queue.Job) error {
	start := time.Now()
	if job.Type == backlogType {
		return nil // not the run's: process mode's worker reaches these after the N measured
	}
	r.b.handled.Add(1)
	if job.Type == warmUpType {
		r.once.Do(func() { close(r.warm) })
		return nil
	}
	r.mu.Lock()
	i := r.n
	r.n++
	if i < len(r.refs) {
		r.refs[i] = jobRef{job.Queue, job.ID}
	}
	if r.n == r.target {
		close(r.reached)
	}
	r.mu.Unlock()
	if r.fn != nil {
		r.fn(i, job, start)
	}
	return nil
}

// count returns how many jobs started, warm-up excluded.
func (r *runner) count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(r.n)
}

// wait blocks until target jobs started, ctx ends, or no job started for stallTimeout.
func (r *runner) wait(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, lastMove := r.count(), time.Now()
	for {
		select {
		case <-r.reached:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if n := r.count(); n != last {
			last, lastMove = n, time.Now()
		} else if time.Since(lastMove) > stallTimeout {
			return fmt.Errorf("bench: no job started for %s (%d of %d started)", stallTimeout, n, r.target)
		}
	}
}

// waitWarm blocks until the warm-up job ran.
func (r *runner) waitWarm(ctx context.Context) error {
	t := time.NewTimer(stallTimeout)
	defer t.Stop()
	select {
	case <-r.warm:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("bench: the warm-up job did not run within %s", stallTimeout)
	}
}

// stop stops the worker gracefully: it returns once every job that ran is acknowledged.
// It may take up to queue.MaxWait, the longest an idle worker blocks before it sees its
// context is done: never time it.
// Calling it again returns the first call's result.
func (r *runner) stop() error {
	r.stopped.Do(func() {
		r.cancel()
		r.err = <-r.result
	})
	return r.err
}

// errorsOnly passes on only Error records: a benchmark's worker logs nothing unless
// something needs an operator (Redis unreachable), through the application's default
// handler.
type errorsOnly struct{ slog.Handler }

func (h errorsOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError && h.Handler.Enabled(ctx, l)
}

func (h errorsOnly) WithAttrs(attrs []slog.Attr) slog.Handler {
	return errorsOnly{h.Handler.WithAttrs(attrs)}
}

func (h errorsOnly) WithGroup(name string) slog.Handler {
	return errorsOnly{h.Handler.WithGroup(name)}
}
