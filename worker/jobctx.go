package worker

import (
	"context"
	"sync"
	"time"
)

// jobCtx is a handler's context. It is cancelled with a cause (lease lost, cancelled by
// an operator, shutdown) like any context.WithCancelCause, and at the job's deadline by
// the worker's deadlineLoop with cause context.DeadlineExceeded, after which Err reports
// context.DeadlineExceeded, as a context.WithTimeout would. One timer serves every job
// of the worker instead of a timer (and a second context) per job.
//
// A context a handler derives from it (WithTimeout, WithCancel, errgroup) must see the
// deadline as DeadlineExceeded too. The context package would hook such a child straight
// onto the inner WithCancelCause context, whose Err is Canceled, when our Done is that
// context's Done channel; so Done is a channel of our own, and the child is hooked through
// AfterFunc instead, which gives it our Err and the inner context's cause. Such a child
// ends on a goroutine of its own a moment after Done closes, as with any AfterFunc; and
// Err turns non-nil a moment before Done closes (the inner context is cancelled first, so
// that whoever wakes on Done finds the cause set).
type jobCtx struct {
	context.Context // from context.WithCancelCause: holds the cause
	cancelInner     context.CancelCauseFunc
	deadline        time.Time
	result          *[]byte // where SetResult stores the result

	mu    sync.Mutex
	done  chan struct{} // made by the first Done, closed by cancel
	ended bool
}

// newJobCtx makes a handler's context: parent's values, never its cancellation (the job
// context ends only through cancel, which also closes Done).
func newJobCtx(parent context.Context, deadline time.Time, result *[]byte) *jobCtx {
	inner, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	return &jobCtx{Context: inner, cancelInner: cancel, deadline: deadline, result: result}
}

// cancel ends the context with cause; the first cause wins, as with WithCancelCause. The
// inner context is cancelled first, so whoever wakes on Done finds Err and the cause set.
func (c *jobCtx) cancel(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelInner(cause)
	if !c.ended {
		c.ended = true
		if c.done != nil {
			close(c.done)
		}
	}
}

func (c *jobCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.ended {
			close(c.done)
		}
	}
	return c.done
}

// AfterFunc is how the context package hooks derived contexts onto this one (see above).
func (c *jobCtx) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(c.Context, f) }

func (c *jobCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *jobCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

func (c *jobCtx) Value(key any) any {
	if _, ok := key.(resultKey); ok {
		return c.result
	}
	return c.Context.Value(key)
}

func (c *jobCtx) String() string { return "worker.jobCtx" }

// register adds r to the running jobs: the heartbeat renews its lease, deadlineLoop
// cancels it at its deadline, watchLoop abandons it if it ignores that, and a shutdown
// that ran out of time cancels it.
func (w *Worker) register(r *run) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[r.job.Lease] = r
	if w.stopCause != nil {
		r.cancel(w.stopCause)
	}
	if w.nextDeadline.IsZero() || r.deadline.Before(w.nextDeadline) {
		w.nextDeadline = r.deadline
		w.deadlines.Reset(time.Until(r.deadline))
	}
}

// stopRuns cancels every running job with cause, and every job that starts from now on.
func (w *Worker) stopRuns(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopCause = cause
	for _, r := range w.running {
		r.cancel(cause)
	}
}

// deadlineLoop cancels each running job at its deadline (its timeout after it started),
// with one timer set to the earliest deadline: jobs of one timeout start in deadline
// order, so the timer is rarely moved.
func (w *Worker) deadlineLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.deadlines.C:
		}
		now := time.Now()
		w.mu.Lock()
		var next time.Time
		for _, r := range w.running {
			switch {
			case !now.Before(r.deadline):
				r.cancel(context.DeadlineExceeded)
			case next.IsZero() || r.deadline.Before(next):
				next = r.deadline
			}
		}
		w.nextDeadline = next
		if !next.IsZero() {
			w.deadlines.Reset(next.Sub(now))
		}
		w.mu.Unlock()
	}
}
