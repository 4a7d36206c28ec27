package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jobs-dev/jobs/internal/errtext"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// Settling: the calls that record how a run ended other than by its ack (hand back,
// postpone, fail), their retries while the lease holds, and the logs of outcomes.

// handBack gives back runs that will not run here (stale in the buffer, the worker is
// stopping, or cancelled), uncounted. They go to the head of their ready list, so they are
// sent newest first: the oldest ends up first in line, and a queue keeps its order.
func (l *loop) handBack(runs []*run) {
	for _, r := range runs {
		r.state = settling
	}
	l.handBackTry(runs, 0)
}

// handBackTry sends the hand backs of runs, after a backoff when it is a retry; those
// that failed are retried while their leases hold (see resendable).
func (l *loop) handBackTry(runs []*run, tries int) {
	l.calls++
	go func() {
		l.pause(tries)
		ctx, cancel := context.WithTimeout(l.bg, reportTimeout)
		defer cancel()
		errs := make([]error, len(runs))
		for i := len(runs) - 1; i >= 0; i-- {
			errs[i] = l.w.broker.HandBack(ctx, runs[i].job, 0)
		}
		l.postEvent(func() {
			l.calls--
			now := time.Now()
			var again []*run
			for i, r := range runs {
				err := errs[i]
				if l.resendable(r, err, now, tries) {
					again = append(again, r)
					continue
				}
				l.settled(r)
				switch {
				case err == nil, errors.Is(err, queue.ErrLeaseLost):
					// A lost lease: another worker has it, or an earlier try of ours whose
					// reply was lost handed it back.
				case errors.Is(err, queue.ErrCancelled):
					l.jobLog(r.job).LogAttrs(context.Background(), slog.LevelInfo, "job cancelled by an operator before it ran; it is dead")
				default:
					l.jobLog(r.job).LogAttrs(context.Background(), slog.LevelWarn,
						"cannot hand back a claimed job; it will be retried after its lease", slog.String("error", err.Error()))
				}
			}
			if len(again) > 0 {
				l.handBackTry(again, tries+1)
			}
		})
	}()
}

// settleTries bounds the tries of a call that records an outcome: a call Redis keeps
// refusing while it renews the lease is not retried forever (about 6.5 s of backoff).
const settleTries = 10

// resendable reports whether a call that records r's outcome, and failed with err, is
// worth another try: the failure may be passing, and r's lease still holds, so the
// outcome it records cannot yet be anyone else's to record. Resending one that was
// applied, its reply lost, is safe: an ack reports done, the others a lost lease.
func (l *loop) resendable(r *run, err error, now time.Time, tries int) bool {
	return err != nil && !errors.Is(err, queue.ErrLeaseLost) && !errors.Is(err, queue.ErrCancelled) &&
		!errors.Is(err, queue.ErrInvalid) && tries+1 < settleTries && l.bg.Err() == nil &&
		now.Sub(r.renewed) < l.cfg.Lease && !(l.stopping && now.After(l.stopAt.Add(l.cfg.AbandonGrace)))
}

// pause waits before a retry: the backoff of its tries, or nothing for a first try.
func (l *loop) pause(tries int) {
	if tries == 0 {
		return
	}
	t := time.NewTimer(backoffDelay(tries, queueBackoffMax))
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.bg.Done():
	}
}

// settleFailure records an attempt that did not succeed: postponed (exclusive lock held,
// no handler here), handed back (the worker is stopping), dropped (the lease was lost:
// another worker owns the job), or failed (retry or dead).
func (l *loop) settleFailure(r *run, o outcome) {
	r.took = o.took
	var pp *postpone
	if errors.Is(o.err, ErrNoHandler) {
		pp = l.noHandler(r, o.err)
	}
	switch {
	case pp != nil || errors.As(o.err, &pp):
		after := pp.after // pp may be a handler's shared error value: never written
		if pp.snooze {
			after = max(after, snoozeFloor(r.job.Postponed))
		}
		// PauseKey of a job without a limit key is a snooze (as its doc says), and is
		// recorded and logged as one, not as a key's pause.
		pauseKey, reason := pp.pauseKey && r.job.LimitKey != "", pp.reason
		if pp.pauseKey && !pauseKey {
			reason = ""
		}
		l.settleCall(r, func(ctx context.Context) (string, error) {
			if pauseKey {
				return "", l.w.broker.PauseKey(ctx, r.job, after, reason)
			}
			return "", l.w.broker.Postpone(ctx, r.job, after, reason)
		}, func(_ string, err error) {
			l.releaseKey(r)
			switch {
			case err != nil:
			case pauseKey:
				l.w.metrics.postpone(r.job, "pause_key")
				l.jobLog(r.job).LogAttrs(context.Background(), slog.LevelInfo, "job's limit key paused",
					slog.String("limit_key", r.job.LimitKey), slog.Duration("for", after))
			case pp.snooze:
				l.w.metrics.postpone(r.job, "snooze")
				l.jobLog(r.job).LogAttrs(context.Background(), slog.LevelInfo, "job snoozed",
					slog.Duration("retry_in", after))
			default:
				l.w.metrics.postpone(r.job, "postpone")
				level := slog.LevelInfo
				if pp.quiet {
					level = slog.LevelDebug
				}
				l.jobLog(r.job).LogAttrs(context.Background(), level, "job postponed",
					slog.String("reason", pp.reason), slog.Duration("retry_in", after))
			}
		})
	case errors.Is(o.cause, ErrShutdown):
		l.settleCall(r, func(ctx context.Context) (string, error) {
			return "", l.w.broker.HandBack(ctx, r.job, 0)
		}, func(_ string, err error) {
			if err == nil {
				l.jobLog(r.job).LogAttrs(context.Background(), slog.LevelInfo, "job handed back: worker is shutting down")
			}
		})
	case errors.Is(o.cause, ErrLeaseLost):
		// Another worker may be running it; anything we report would be refused.
		l.settled(r)
		l.jobLog(r.job).LogAttrs(context.Background(), slog.LevelWarn, "job lost its lease; its outcome is dropped",
			slog.String("error", o.err.Error()))
	default:
		l.fail(r, o)
	}
}

// fail records a failed attempt: retried after the backoff while attempts remain, dead
// otherwise or when the handler said SkipRetry.
func (l *loop) fail(r *run, o outcome) {
	err := o.err
	switch {
	case errors.Is(o.cause, context.DeadlineExceeded):
		err = fmt.Errorf("timeout after %s: %w", r.deadline.Sub(r.started), err)
	case errors.Is(o.cause, ErrCancelled):
		err = fmt.Errorf("%w: %w", ErrCancelled, err)
	case errors.Is(o.cause, ErrLeaseExpiring):
		err = fmt.Errorf("%w: %w", ErrLeaseExpiring, err)
	}
	policy := l.cfg.Types[r.job.Type]
	retryIn := proto.NoRetry
	if !IsSkipRetry(err) && (policy.MaxRetry == 0 || r.job.Attempt <= policy.MaxRetry) {
		backoff := l.cfg.BackoffFunc
		if policy.Backoff != nil {
			backoff = policy.Backoff
		}
		// A negative backoff means "at once", never "no retry".
		retryIn = max(backoff(r.job, err), 0)
	}
	reason := err.Error()
	l.settleCall(r, func(ctx context.Context) (string, error) {
		state, ferr := l.w.broker.Fail(ctx, r.job, reason, retryIn)
		if ferr == nil {
			l.w.failed(r.job, state, reason, err) // on this call's goroutine: never the loop's
		}
		return string(state), ferr
	}, func(state string, ferr error) {
		if ferr != nil {
			return
		}
		outcome, level := outcomeRetry, slog.LevelWarn
		var asked *retryRequested
		if errors.As(err, &asked) {
			level = slog.LevelInfo
		}
		if state == string(queue.StateDead) {
			outcome, level = outcomeDead, slog.LevelError
		}
		l.observe(r, outcome, o.took)
		attrs := []slog.Attr{slog.String("error", errtext.Summary(reason)), slog.String("now", state)}
		if state == string(queue.StateRetry) {
			attrs = append(attrs, slog.Duration("retry_in", retryIn))
		}
		l.jobLog(r.job).LogAttrs(context.Background(), level, "job failed", attrs...)
	})
}

// settleCall runs one call that records a run's outcome, retried while it may succeed
// (see resendable), then done on the loop.
func (l *loop) settleCall(r *run, call func(context.Context) (string, error), done func(string, error)) {
	l.settleTry(r, call, done, 0)
}

func (l *loop) settleTry(r *run, call func(context.Context) (string, error), done func(string, error), tries int) {
	l.calls++
	go func() {
		l.pause(tries)
		ctx, cancel := context.WithTimeout(l.bg, reportTimeout)
		res, err := call(ctx)
		cancel()
		l.postEvent(func() {
			l.calls--
			if l.resendable(r, err, time.Now(), tries) {
				l.settleTry(r, call, done, tries+1)
				return
			}
			l.settled(r)
			done(res, err)
			if tries > 0 && errors.Is(err, queue.ErrLeaseLost) {
				// Most likely an earlier try was applied and only its reply was lost.
				l.jobLog(r.job).LogAttrs(context.Background(), slog.LevelInfo,
					"job outcome resent after a failed call: the lease is gone, so the first call was most likely applied")
				return
			}
			l.reportError(r.job, err)
		})
	}()
}

// noHandler turns a job type this worker has no handler for into a postponement: about
// 200ms for the first ten times the job meets a worker without the handler (in a mixed
// fleet it soon meets one that has it), then doubling from 1s to 5 min, so jobs of a type
// no worker handles cost little while they wait.
func (l *loop) noHandler(r *run, err error) *postpone {
	now := time.Now()
	if last, ok := l.warned[r.job.Type]; !ok || now.Sub(last) >= time.Minute {
		l.warned[r.job.Type] = now
		l.log.LogAttrs(context.Background(), slog.LevelWarn,
			"no handler for a job type here: postponing its jobs for a worker that has one",
			slog.String(attrJobType, r.job.Type), slog.String(attrQueue, r.q.name))
	}
	// Each postponement is logged at Debug only: the warning above tells the operator, and a
	// type without a handler here met every claim of its jobs (248 Info lines in 5 s for 20).
	return &postpone{after: noHandlerDelay(r.job.Postponed), quiet: true,
		reason: fmt.Sprintf("%v on worker %s (postponed, not counted as an attempt)", err, l.cfg.ID)}
}

// noHandlerDelay is the postponement of a job that met n workers without its handler.
func noHandlerDelay(n int) time.Duration {
	return jittered(growing(n, 200*time.Millisecond, time.Second, MaxBackoff))
}

// snoozeFloor is the least a snooze (Snooze, RetryAfter, PauseKey, exit 76 and 77) of a
// job postponed n times before waits: nothing for its first postponeQuick, then 10 ms,
// doubled each time, up to a second. A handler that snoozes for nothing, or for a time
// already past (RetryAfter(time.Until(reset)) after the reset), would otherwise run its
// job about 450 times a second on one worker, each a claim, a hand back and a log line;
// so it settles at once a second, while a snooze asked for a second or more, or a few
// quick ones, wait exactly what they ask.
func snoozeFloor(n int) time.Duration { return growing(n, 0, 10*time.Millisecond, time.Second) }

// growing is the delay of a job postponed n times before, for a cause that is likely to
// last when it repeats (no handler here, a snooze for nothing, a lock Redis refuses):
// quick for its first postponeQuick postponements, then from, doubled each time, up to
// most.
func growing(n int, quick, from, most time.Duration) time.Duration {
	if n < postponeQuick {
		return quick
	}
	return min(from<<min(n-postponeQuick, 20), most)
}

// postponeQuick is how many postponements of a job wait their quick delay (growing).
const postponeQuick = 10

// jittered is d give or take half, so that jobs postponed together do not come back in
// step.
func jittered(d time.Duration) time.Duration { return d/2 + rand.N(d+1) }

// reportError logs a failure to record a job's outcome.
func (l *loop) reportError(job *queue.Job, err error) {
	ctx := context.Background()
	switch {
	case err == nil:
	case errors.Is(err, queue.ErrLeaseLost):
		l.jobLog(job).LogAttrs(ctx, slog.LevelWarn, "job lost its lease before it finished; another worker owns it now")
	case errors.Is(err, queue.ErrCancelled):
		l.jobLog(job).LogAttrs(ctx, slog.LevelInfo, "job was cancelled by an operator; it is dead")
	default:
		// The lease will expire and any live worker will reap the job: at-least-once holds.
		l.jobLog(job).LogAttrs(ctx, slog.LevelError, "cannot record job outcome; it will be retried after its lease",
			slog.String("error", err.Error()))
	}
}

// jobLog returns the worker's logger with a job's attributes. Built only when something is
// logged: the happy path of a job logs nothing unless Debug is enabled.
func (l *loop) jobLog(job *queue.Job) *slog.Logger {
	return l.log.With(jobAttrs(job)...)
}
