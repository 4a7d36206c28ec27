package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/jobs-dev/jobs/lock"
	"github.com/jobs-dev/jobs/queue"
)

// abandonGrace is how long a handler may take to return once its context is cancelled.
// Past it the handler is abandoned (its goroutine cannot be killed) and the attempt is
// settled without it, so one stuck handler cannot hold a slot or a shutdown forever.
const abandonGrace = 5 * time.Second

// reportTimeout bounds the Redis call that settles an attempt. It runs on a context of
// its own: a worker that is shutting down must still report the jobs it finished.
const reportTimeout = 10 * time.Second

type outcome struct {
	err    error
	result []byte
	took   time.Duration // measured on this worker's clock
	// cause is why the handler's context had ended when it returned (nil: it had not).
	// Taken then, not later: a handler that failed on its own just before a shutdown
	// must count as failed, not be handed back as interrupted.
	cause error
}

// execute runs one attempt of a claimed job end to end: the handler under the job's
// timeout, a panic turned into a failure with its stack, then exactly one of ack, fail
// (retry or dead) or hand back. A success keeps the slot (kept = true: the caller runs
// the next buffered job in it) and leaves the ack to the fetch loop, which carries the
// acks of every slot in one round trip. Any other outcome frees the slot before its own
// round trip, so the next claim overlaps it: the concurrency limit bounds handlers, not
// bookkeeping.
func (w *Worker) execute(jobsCtx context.Context, c claimed) (kept bool) {
	job := c.job
	ctx, cancel := context.WithCancelCause(jobsCtx)
	defer cancel(nil)
	// The lease began when the claim was sent: a heartbeat renews it from then.
	r := &run{job: job, cancel: cancel, renewed: c.at}
	w.mu.Lock()
	w.running[job.Lease] = r
	w.mu.Unlock()
	forget := func() {
		w.mu.Lock()
		delete(w.running, job.Lease)
		w.mu.Unlock()
	}
	timeout := job.Timeout
	if timeout <= 0 {
		timeout = queue.DefaultTimeout
	}
	var unlock func()
	if job.Exclusive != "" {
		lk, err := w.locker.TryLock(ctx, w.client.ExclusiveLock(job.Exclusive), 2*w.cfg.Lease)
		if err != nil {
			forget()
			w.deferExclusive(ctx, job, err)
			w.slots.release()
			return false
		}
		// Lost (expired while Redis was unreachable): another worker may start its twin.
		lk.KeepAlive(func(error) { r.cancel(errLockLost) })
		// Exclusivity is about handlers: the lock goes as soon as this one returns, before
		// its outcome is recorded, so the next job of the key can start.
		unlock = func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
			defer cancel()
			if err := lk.Release(rctx); err != nil && !errors.Is(err, lock.ErrLost) {
				w.jobLog(job).LogAttrs(rctx, slog.LevelWarn, "cannot release exclusive lock; it expires by itself",
					slog.String("error", err.Error()))
			}
		}
	}
	o := w.runHandler(ctx, job, timeout)
	w.slots.timed(o.took)
	if unlock != nil {
		unlock()
	}
	forget()
	if o.err == nil {
		w.slots.ack(finished{job: job, result: o.result, took: o.took})
		return true
	}
	w.slots.release()
	w.metrics.setBusy(int64(w.slots.running()))
	cause := o.cause
	switch {
	case errors.Is(cause, context.DeadlineExceeded):
		o.err = fmt.Errorf("timeout after %s: %w", timeout, o.err)
	case errors.Is(cause, errCancelled):
		o.err = fmt.Errorf("%w: %w", errCancelled, o.err)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer rcancel()
	w.settle(rctx, job, o, cause)
	return false
}

// runHandler runs the handler under the job's timeout. A handler that does not return
// within abandonGrace of its context ending is abandoned (its goroutine cannot be killed)
// and the attempt counts as failed.
func (w *Worker) runHandler(ctx context.Context, job *queue.Job, timeout time.Duration) (o outcome) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var result []byte
	hctx := context.WithValue(tctx, resultKey{}, &result)

	done := make(chan outcome, 1)
	began := time.Now()
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: &panicError{value: v, stack: debug.Stack()}, cause: context.Cause(tctx)}
			}
		}()
		err := w.cfg.Handler.Process(hctx, job)
		done <- outcome{err: err, result: result, cause: context.Cause(tctx)}
	}()

	select {
	case o = <-done:
	case <-tctx.Done():
		select {
		case o = <-done:
		case <-time.After(abandonGrace):
			o.err = fmt.Errorf("handler abandoned: it did not return within %s of its context ending", abandonGrace)
			o.cause = context.Cause(tctx)
		}
	}
	o.took = time.Since(began)
	return o
}

// ExclusiveRetryDelay is about how long an exclusive job whose lock is held waits before
// it is tried again (with +-50% jitter, so waiting jobs do not all retry in step).
const ExclusiveRetryDelay = time.Second

// deferExclusive gives back an exclusive job whose lock is held elsewhere (or could not be
// taken): scheduled a little later, no attempt counted.
func (w *Worker) deferExclusive(ctx context.Context, job *queue.Job, why error) {
	log := w.jobLog(job)
	delay := ExclusiveRetryDelay/2 + rand.N(ExclusiveRetryDelay)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	if err := w.client.HandBack(rctx, job, delay); err != nil {
		log.LogAttrs(rctx, slog.LevelWarn, "cannot defer exclusive job; it will be retried after its lease",
			slog.String("error", err.Error()))
		return
	}
	level := slog.LevelDebug
	if !errors.Is(why, lock.ErrHeld) {
		level = slog.LevelWarn // Redis trouble, not mere contention
	}
	log.LogAttrs(rctx, level, "exclusive job deferred", slog.String("reason", why.Error()),
		slog.Duration("retry_in", delay))
}

// settle records a failed attempt: handed back when the worker is shutting down, dropped
// when the lease was lost, else retried or dead-lettered.
func (w *Worker) settle(ctx context.Context, job *queue.Job, o outcome, cause error) {
	log := w.jobLog(job)
	var err error
	switch {
	case errors.Is(cause, errShutdown):
		err = w.client.HandBack(ctx, job, 0)
		if err == nil {
			log.LogAttrs(ctx, slog.LevelInfo, "job handed back: worker is shutting down")
		}
	case errors.Is(cause, errLeaseLost):
		// Another worker may be running it; anything we report would be refused.
		log.LogAttrs(ctx, slog.LevelWarn, "job lost its lease; its outcome is dropped",
			slog.String("error", o.err.Error()))
		return
	default:
		retryIn := queue.NoRetry
		if !IsSkipRetry(o.err) {
			retryIn = w.cfg.BackoffFunc(job, o.err)
		}
		var state queue.State
		state, err = w.client.Fail(ctx, job, o.err.Error(), retryIn)
		if err == nil {
			outcome := outcomeRetry
			if state == queue.StateDead {
				outcome = outcomeDead
			}
			w.metrics.observe(job, outcome, o.took)
			level := slog.LevelWarn
			var asked *retryRequested
			if errors.As(o.err, &asked) {
				level = slog.LevelInfo
			}
			if state == queue.StateDead {
				level = slog.LevelError
			}
			attrs := []slog.Attr{slog.String("error", firstLine(o.err.Error())), slog.String("now", string(state))}
			if state == queue.StateRetry {
				attrs = append(attrs, slog.Duration("retry_in", retryIn))
			}
			log.LogAttrs(ctx, level, "job failed", attrs...)
		}
	}
	w.reportError(ctx, job, err)
}

// acked records the outcome of a succeeded job's ack, sent by the fetch loop.
func (w *Worker) acked(ctx context.Context, f finished, err error) {
	if err == nil {
		w.metrics.observe(f.job, outcomeSuccess, f.took)
		if w.log.Enabled(ctx, slog.LevelDebug) {
			w.jobLog(f.job).LogAttrs(ctx, slog.LevelDebug, "job done", slog.Duration("took", f.took))
		}
		return
	}
	w.reportError(ctx, f.job, err)
}

// reportError logs a failure to record a job's outcome.
func (w *Worker) reportError(ctx context.Context, job *queue.Job, err error) {
	switch {
	case err == nil:
	case errors.Is(err, queue.ErrLeaseLost):
		w.jobLog(job).LogAttrs(ctx, slog.LevelWarn, "job lost its lease before it finished; another worker owns it now")
	default:
		// The lease will expire and any live worker will reap the job: at-least-once holds.
		w.jobLog(job).LogAttrs(ctx, slog.LevelError, "cannot record job outcome; it will be retried after its lease",
			slog.String("error", err.Error()))
	}
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
