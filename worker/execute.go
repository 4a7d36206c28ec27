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
// (retry or dead) or hand back. It calls release when the handler is done, before the
// outcome's round trip, so the next claim overlaps it: the concurrency limit bounds
// handlers, not bookkeeping.
func (w *Worker) execute(ctx context.Context, r *run, release func()) {
	job := r.job
	log := w.log.With(slog.String(attrJobID, job.ID), slog.String(attrJobType, job.Type),
		slog.String(attrQueue, job.Queue), slog.Int(attrAttempt, job.Attempt))
	timeout := job.Timeout
	if timeout <= 0 {
		timeout = queue.DefaultTimeout
	}
	if job.Exclusive != "" {
		lk, err := w.locker.TryLock(ctx, w.client.ExclusiveLock(job.Exclusive), 2*w.cfg.Lease)
		if err != nil {
			w.deferExclusive(ctx, log, job, err)
			return
		}
		// Lost (expired while Redis was unreachable): another worker may start its twin.
		lk.KeepAlive(func(error) { r.cancel(errLockLost) })
		// Exclusivity is about handlers: the lock goes as soon as this one returns, before
		// its slot is freed and its outcome recorded, so the next job of the key can start.
		free := release
		release = func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
			defer cancel()
			if err := lk.Release(rctx); err != nil && !errors.Is(err, lock.ErrLost) {
				log.LogAttrs(rctx, slog.LevelWarn, "cannot release exclusive lock; it expires by itself",
					slog.String("error", err.Error()))
			}
			free()
		}
	}
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

	var o outcome
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
	release()
	cause := o.cause
	switch {
	case o.err != nil && errors.Is(cause, context.DeadlineExceeded):
		o.err = fmt.Errorf("timeout after %s: %w", timeout, o.err)
	case o.err != nil && errors.Is(cause, errCancelled):
		o.err = fmt.Errorf("%w: %w", errCancelled, o.err)
	}

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer rcancel()
	w.settle(rctx, log, job, o, cause)
}

// ExclusiveRetryDelay is about how long an exclusive job whose lock is held waits before
// it is tried again (with +-50% jitter, so waiting jobs do not all retry in step).
const ExclusiveRetryDelay = time.Second

// deferExclusive gives back an exclusive job whose lock is held elsewhere (or could not be
// taken): scheduled a little later, no attempt counted.
func (w *Worker) deferExclusive(ctx context.Context, log *slog.Logger, job *queue.Job, why error) {
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

// settle reports the attempt's outcome to Redis.
func (w *Worker) settle(ctx context.Context, log *slog.Logger, job *queue.Job, o outcome, cause error) {
	var err error
	switch {
	case o.err == nil:
		err = w.client.Ack(ctx, job, o.result)
		if err == nil {
			w.metrics.observe(job, outcomeSuccess, o.took)
			log.LogAttrs(ctx, slog.LevelDebug, "job done", slog.Duration("took", o.took))
		}
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
	switch {
	case errors.Is(err, queue.ErrLeaseLost):
		log.LogAttrs(ctx, slog.LevelWarn, "job lost its lease before it finished; another worker owns it now")
	case err != nil:
		// The lease will expire and any live worker will reap the job: at-least-once holds.
		log.LogAttrs(ctx, slog.LevelError, "cannot record job outcome; it will be retried after its lease",
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
