package worker

import (
	"container/heap"
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

// The loop's Redis calls. Each runs on a goroutine of its own and hands its reply back to
// the loop as an event, so a slow or failing call (a cluster master down, a cut network)
// never holds the loop, other queues, or the watchdogs. Calls counted in l.calls are
// waited for before Run returns.

// reportTimeout bounds a call that records outcomes. It runs on a context of its own: a
// worker that is shutting down must still report the jobs it finished.
const reportTimeout = 10 * time.Second

// postEvent hands f to the loop; after the loop has exited it is dropped.
func (l *loop) postEvent(f func()) {
	select {
	case l.events <- f:
	case <-l.exited:
	}
}

// post hands a slot's result to the loop; after the loop has exited it is dropped.
func (l *loop) post(res result) {
	select {
	case l.results <- res:
	case <-l.exited:
	}
}

// sendExchange sends one AckClaim on q: up to MaxBatch of its acks, and a claim of n
// jobs, reserved until the reply is placed.
func (l *loop) sendExchange(q *queueState, n int, now time.Time) {
	acks := q.acks[:min(len(q.acks), proto.MaxBatch)]
	q.acks = append([]*run(nil), q.acks[len(acks):]...)
	q.inflight++
	if n > 0 {
		q.claiming++
	}
	q.sent++
	seq := q.sent
	l.reserved += n
	l.calls++
	fin := make([]*queue.Job, len(acks))
	results := make([][]byte, len(acks))
	for i, r := range acks {
		fin[i], results[i] = r.job, r.result
	}
	go func() {
		ctx, cancel := context.WithTimeout(l.bg, reportTimeout)
		acked, jobs, lim, err := l.w.broker.AckClaimLimited(ctx, q.name, fin, results, n, l.cfg.Lease, l.cfg.ID)
		cancel()
		l.postEvent(func() { l.exchanged(q, seq, n, now, acks, acked, jobs, lim, err) })
	}()
}

// exchanged takes an AckClaim reply.
func (l *loop) exchanged(q *queueState, seq uint64, n int, sent time.Time, acks []*run, acked []error,
	jobs []*queue.Job, lim proto.Limited, err error) {
	now := time.Now()
	q.inflight--
	if n > 0 {
		q.claiming--
	}
	l.calls--
	l.reserved -= n
	if acked == nil && len(acks) > 0 {
		// The call failed, perhaps after the acks were applied: resending them is safe
		// (an ack resent by the same lease reports done), until their leases may be gone.
		var keep []*run
		for _, r := range acks {
			if l.resendable(r, err, now, 0) {
				keep = append(keep, r)
			} else {
				l.settled(r)
				l.reportError(r.job, err)
			}
		}
		q.acks = append(keep, q.acks...)
	}
	for i, r := range acks {
		if acked != nil {
			l.acked(r, acked[i])
		}
	}
	if err != nil {
		l.failed(q, err, now)
	} else {
		l.answered(q, now)
		if n > 0 {
			q.dry = len(jobs) < n && lim.By == ""
			l.limitMet(q, lim, sent)
		}
	}
	q.replies[seq] = claimReply{jobs: jobs, sent: sent, got: now, redis: lim.Now}
	l.held += len(jobs)
	l.placeHeld(q, now)
}

// acked records the outcome of one ack.
func (l *loop) acked(r *run, err error) {
	l.settled(r)
	ctx := context.Background()
	switch {
	case err == nil:
		l.observe(r, outcomeSuccess, r.took)
		if l.log.Enabled(ctx, slog.LevelDebug) {
			l.jobLog(r.job).LogAttrs(ctx, slog.LevelDebug, "job done", slog.Duration("took", r.took))
		}
	case errors.Is(err, queue.ErrCancelled):
		l.observe(r, outcomeDead, r.took)
		l.jobLog(r.job).LogAttrs(ctx, slog.LevelWarn, "job succeeded after it was cancelled by an operator; it is dead")
	default:
		l.reportError(r.job, err)
	}
}

// settled forgets a run whose outcome is recorded (or given up).
func (l *loop) settled(r *run) { delete(l.runs, r.job.Lease) }

// heartbeat renews the leases of the running and settling runs, one call per queue (the
// queue package caps each script call at MaxBatch jobs). A lease reported lost, or a job
// an operator cancelled, has its handler cancelled.
//
// Beats are a third of the lease apart and each gives up after a quarter of it, so a hung
// beat has failed before the next one is due: the watchdog (five sixths of the lease
// after the last renewal) fires only when two beats in a row failed. A failed beat is
// retried a twelfth of the lease later, and a queue whose beat was still in flight when
// the others beat is beaten as soon as that reply comes.
func (l *loop) heartbeat(now time.Time) {
	l.nextBeat = now.Add(l.cfg.Lease / 3)
	byQueue := map[*queueState][]*run{}
	for _, r := range l.runs {
		if r.state == running || r.state == settling {
			if r.q.beating {
				r.q.beatMissed = true
				continue
			}
			byQueue[r.q] = append(byQueue[r.q], r)
		}
	}
	for q, runs := range byQueue {
		l.beat(q, runs, now)
	}
}

// beat sends one heartbeat on q for runs, carrying the progress their handlers reported
// since it was last sent (progress.go also sends one for runs with new progress only).
func (l *loop) beat(q *queueState, runs []*run, now time.Time) {
	q.beating = true
	l.calls++
	jobs := make([]*queue.Job, len(runs))
	for i, r := range runs {
		jobs[i] = r.job
	}
	progress := l.takeProgress(runs, now, false)
	go func() {
		ctx, cancel := context.WithTimeout(l.bg, min(l.cfg.Lease/4, reportTimeout))
		lost, cancelled, err := l.w.broker.HeartbeatProgress(ctx, q.name, l.cfg.Lease, jobs, progress)
		cancel()
		l.postEvent(func() {
			l.progressAnswered(runs, progress, err, time.Now())
			l.beaten(q, runs, now, lost, cancelled, err)
		})
	}()
}

// beaten takes a heartbeat's reply.
func (l *loop) beaten(q *queueState, runs []*run, sent time.Time, lost, cancelled []string, err error) {
	now := time.Now()
	q.beating = false
	l.calls--
	if q.beatMissed {
		q.beatMissed = false
		l.nextBeat = now
	}
	if err != nil {
		// Try again soon; if Redis stays out of reach, the watchdog cancels each handler
		// before its lease can expire.
		l.nextBeat = minTime(l.nextBeat, now.Add(l.cfg.Lease/12))
		l.log.LogAttrs(context.Background(), slog.LevelWarn, "heartbeat failed",
			slog.String(attrQueue, q.name), slog.String("error", err.Error()))
		return
	}
	l.answered(q, now)
	isLost := make(map[string]bool, len(lost))
	for _, t := range lost {
		isLost[t] = true
	}
	for _, r := range runs {
		if r.state != running && r.state != settling {
			continue
		}
		if isLost[r.job.Lease] {
			l.stopRun(r, ErrLeaseLost, now)
			continue
		}
		r.renewed = sent
		if r.index >= 0 {
			heap.Fix(&l.timers, r.index)
		}
	}
	for _, t := range cancelled {
		if r := l.runs[t]; r != nil {
			l.cancelRun(r, now)
		}
	}
}

// maintain reaps q's expired leases (about once a second) and promotes its due delayed
// and retrying jobs (when one is due, or a wake token or a reap asked).
func (l *loop) maintain(q *queueState, now time.Time) {
	reap, promote := !now.Before(q.nextReap), !now.Before(q.nextPromote)
	if promote {
		q.promoteAsked = false
	}
	q.maintaining = true
	l.calls++
	go func() {
		ctx, cancel := context.WithTimeout(l.bg, reportTimeout)
		defer cancel()
		var reaped, moved int
		next := time.Duration(-1)
		var err error
		if reap {
			reaped, err = l.w.broker.Reap(ctx, q.name)
		}
		if err == nil && (promote || reaped > 0) {
			promote = true
			moved, next, err = l.w.broker.Promote(ctx, q.name)
		}
		l.postEvent(func() { l.maintained(q, reap, promote, reaped, moved, next, err) })
	}()
}

func (l *loop) maintained(q *queueState, reap, promote bool, reaped, moved int, next time.Duration, err error) {
	now := time.Now()
	q.maintaining = false
	l.calls--
	if err != nil {
		l.failed(q, err, now)
		return
	}
	l.answered(q, now)
	if reap {
		q.nextReap = now.Add(min(time.Second, l.cfg.Lease/2))
		if reaped > 0 {
			l.log.LogAttrs(context.Background(), slog.LevelWarn, "reaped jobs whose lease expired",
				slog.String(attrQueue, q.name), slog.Int("jobs", reaped))
		}
	}
	if promote {
		wait := proto.MaxWait
		if next >= 0 {
			wait = min(wait, next)
		}
		q.nextPromote = now.Add(wait)
	}
	if q.promoteAsked {
		q.nextPromote = now // a wake token asked while this call was in flight
	}
	if moved > 0 || reaped > 0 {
		q.dry = false
	}
}

// wait blocks on the wake lists of the queues found empty, while there is room for a job
// and no wait runs: a job enqueued (or made due) on one of them wakes this worker.
func (l *loop) wait(now time.Time) {
	if l.waiting || l.stopping || now.Before(l.waitRetry) || l.room() == 0 {
		return
	}
	var on []*queueState
	var names []string
	for _, q := range l.queues {
		if (q.dry || q.limit.waitsForSlot(now)) && !now.Before(q.retryAt) {
			on = append(on, q)
			names = append(names, q.name)
		}
	}
	if len(on) == 0 {
		return
	}
	l.waiting = true
	go func() {
		q, token, err := l.w.broker.Wait(l.bg, names, proto.MaxWait)
		l.wakes <- wakeup{queue: q, token: token, err: err, on: on} // buffered 1: never blocks
	}()
}

// passOn pushes back, on a goroutine of its own, a wake token this worker popped but will
// not act on: another idle worker can.
func (l *loop) passOn(wu wakeup) {
	if wu.token == "" || wu.queue == "" {
		return
	}
	l.calls++
	go func() {
		l.wakeAnother(l.bg, wu)
		l.postEvent(func() { l.calls-- })
	}()
}

// passOnTimeout bounds passing on a wake token: its worth fades in a second (idle workers
// look again at the end of their wait).
const passOnTimeout = time.Second

// wakeAnother pushes back a wake token; called off the loop.
func (l *loop) wakeAnother(ctx context.Context, wu wakeup) {
	ctx, cancel := context.WithTimeout(ctx, passOnTimeout)
	defer cancel()
	if err := l.w.broker.Wake(ctx, wu.queue, wu.token); err != nil {
		l.log.LogAttrs(ctx, slog.LevelWarn, "cannot pass on a wake token", slog.String("error", err.Error()))
	}
}

// watchCancels turns operators' cancel notices into cancelled runs, within about a round
// trip of the cancel. Notices missed while disconnected are caught by the heartbeat.
func (l *loop) watchCancels(ctx context.Context) {
	for ctx.Err() == nil {
		err := l.w.broker.WatchCancels(ctx, func(n proto.CancelNotice) {
			l.postEvent(func() {
				if n.ID == "" {
					l.limitChanged(n.Queue)
					return
				}
				now := time.Now()
				for _, r := range l.runs {
					if r.job.ID == n.ID && r.q.name == n.Queue {
						l.cancelRun(r, now)
					}
				}
			})
		})
		if err == nil || ctx.Err() != nil {
			return
		}
		l.log.LogAttrs(ctx, slog.LevelWarn, "cannot watch for cancelled jobs; the heartbeat still sees them",
			slog.String("error", err.Error()))
		select {
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
		}
	}
}

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
		l.settleCall(r, func(ctx context.Context) (string, error) {
			if pp.pauseKey {
				return "", l.w.broker.PauseKey(ctx, r.job, pp.after, pp.reason)
			}
			return "", l.w.broker.Postpone(ctx, r.job, pp.after, pp.reason)
		}, func(_ string, err error) {
			l.releaseKey(r)
			switch {
			case err != nil:
			case pp.pauseKey:
				l.jobLog(r.job).LogAttrs(context.Background(), slog.LevelInfo, "job's limit key paused",
					slog.String("limit_key", r.job.LimitKey), slog.Duration("for", pp.after))
			case pp.snooze:
				l.jobLog(r.job).LogAttrs(context.Background(), slog.LevelInfo, "job snoozed",
					slog.Duration("retry_in", pp.after))
			default:
				level := slog.LevelInfo
				if pp.quiet {
					level = slog.LevelDebug
				}
				l.jobLog(r.job).LogAttrs(context.Background(), level, "job postponed",
					slog.String("reason", pp.reason), slog.Duration("retry_in", pp.after))
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
	return &postpone{after: noHandlerDelay(r.job.Postponed),
		reason: fmt.Sprintf("%v on worker %s (postponed, not counted as an attempt)", err, l.cfg.ID)}
}

// noHandlerDelay is the postponement of a job that met n workers without its handler.
func noHandlerDelay(n int) time.Duration {
	d := 200 * time.Millisecond
	if n >= noHandlerQuick {
		d = min(time.Second<<min(n-noHandlerQuick, 20), MaxBackoff)
	}
	return d/2 + rand.N(d+1) // +-50%
}

// noHandlerQuick is how many quick postponements a job without a handler here gets.
const noHandlerQuick = 10

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
