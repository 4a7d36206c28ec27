package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/jobs-dev/jobs/lock"
	"github.com/jobs-dev/jobs/queue"
)

// reportTimeout bounds the Redis call that settles an attempt. It runs on a context of
// its own: a worker that is shutting down must still report the jobs it finished.
const reportTimeout = 10 * time.Second

type outcome struct {
	err    error
	result []byte
	took   time.Duration // measured on this worker's clock
	// cause is why the handler's context had ended when it returned (nil: it had not).
	cause error
}

// execute runs one attempt of a claimed job end to end: the handler under the job's
// timeout, a panic turned into a failure with its stack, then exactly one of ack, fail
// (retry or dead) or hand back. A success keeps the slot (kept = true: the caller runs
// the next buffered job in it) and leaves the ack to the fetch loop, which carries the
// acks of every slot in one round trip. Any other outcome frees the slot before its own
// round trip, so the next claim overlaps it: the concurrency limit bounds handlers, not
// bookkeeping.
//
// The handler runs on the caller's goroutine, under a jobCtx: no goroutine, channel or
// timer per job (deadlineLoop enforces every timeout with one timer). One that has not
// returned Config.AbandonGrace after its context ended
// is abandoned by watchLoop, which settles the attempt as failed, frees the slot and
// calls jobs.Done for the caller, whose goroutine stays blocked in the handler (it cannot
// be killed). execute then reports abandoned once the handler returns, if it ever does,
// and the caller must do nothing more.
func (w *Worker) execute(jobsCtx context.Context, c claimed) (kept, abandoned bool) {
	job := c.job
	timeout := job.Timeout
	if timeout <= 0 {
		timeout = queue.DefaultTimeout
	}
	began := time.Now()
	var result []byte
	hctx := newJobCtx(jobsCtx, began.Add(timeout), &result)
	defer hctx.cancel(nil)
	ctx := hctx.Context
	// The lease began when the claim was sent: a heartbeat renews it from then.
	r := &run{job: job, cancel: hctx.cancel, renewed: c.at, ctx: hctx, deadline: hctx.deadline,
		timeout: timeout, began: began}
	w.register(r)
	if job.Exclusive != "" {
		lk, err := w.locker.TryLock(ctx, w.client.ExclusiveLock(job.Exclusive), 2*w.cfg.Lease)
		if err != nil {
			r.taken.Store(true)
			w.forget(r)
			w.deferExclusive(ctx, job, err)
			w.slots.release()
			return false, false
		}
		// Lost (expired while Redis was unreachable): another worker may start its twin.
		lk.KeepAlive(func(error) { r.cancel(errLockLost) })
		// Exclusivity is about handlers: the lock goes as soon as this one returns, before
		// its outcome is recorded, so the next job of the key can start.
		unlock := func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
			defer cancel()
			if err := lk.Release(rctx); err != nil && !errors.Is(err, lock.ErrLost) {
				w.jobLog(job).LogAttrs(rctx, slog.LevelWarn, "cannot release exclusive lock; it expires by itself",
					slog.String("error", err.Error()))
			}
		}
		w.mu.Lock() // watchLoop may read it
		r.unlock = unlock
		w.mu.Unlock()
	}
	began = time.Now() // after the lock, if any
	err := w.call(hctx, job)
	// The cause is taken now, not later: a handler that failed on its own just before a
	// shutdown must count as failed, not be handed back as interrupted.
	o := outcome{err: err, result: result, cause: context.Cause(hctx), took: time.Since(began)}
	if !r.taken.CompareAndSwap(false, true) {
		return false, true
	}
	return w.finish(r, o), false
}

// finish records an attempt's outcome, on the slot's goroutine or, for an abandoned
// handler, on watchLoop's.
func (w *Worker) finish(r *run, o outcome) (kept bool) {
	job := r.job
	w.slots.timed(o.took)
	if r.unlock != nil {
		r.unlock()
	}
	w.forget(r)
	if o.err == nil {
		w.slots.ack(finished{job: job, result: o.result, took: o.took})
		return true
	}
	w.slots.release()
	w.metrics.setBusy(int64(w.slots.running()))
	cause := o.cause
	switch {
	case errors.Is(cause, context.DeadlineExceeded):
		o.err = fmt.Errorf("timeout after %s: %w", r.timeout, o.err)
	case errors.Is(cause, errCancelled):
		o.err = fmt.Errorf("%w: %w", errCancelled, o.err)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(r.ctx), reportTimeout)
	defer rcancel()
	w.settle(rctx, job, o, cause)
	return false
}

func (w *Worker) forget(r *run) {
	w.mu.Lock()
	delete(w.running, r.job.Lease)
	w.mu.Unlock()
}

// watchLoop abandons handlers that have not returned Config.AbandonGrace after their context
// ended (timeout, lost lease, cancel, shutdown), so one stuck handler cannot hold a slot
// or a shutdown forever. One loop for all jobs, checking twice a second, instead of a
// timer per job.
func (w *Worker) watchLoop(ctx context.Context, jobs *sync.WaitGroup) {
	grace := w.cfg.AbandonGrace
	t := time.NewTicker(max(grace/10, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var stuck []*run
		w.mu.Lock()
		for _, r := range w.running {
			switch {
			case r.ctx.Err() == nil:
			case r.ended.IsZero():
				r.ended = now
			case now.Sub(r.ended) >= grace && r.taken.CompareAndSwap(false, true):
				stuck = append(stuck, r)
			}
		}
		w.mu.Unlock()
		for _, r := range stuck {
			go func() {
				defer jobs.Done()
				w.finish(r, outcome{
					err:   fmt.Errorf("handler abandoned: it did not return within %s of its context ending", grace),
					cause: context.Cause(r.ctx), took: time.Since(r.began)})
			}()
		}
	}
}

// call runs the handler, turning a panic into a failure with its stack.
func (w *Worker) call(ctx context.Context, job *queue.Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return w.cfg.Handler.Process(ctx, job)
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
