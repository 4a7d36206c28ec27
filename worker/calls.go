package worker

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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

// mark tells the benchmarks' trace (Worker.trace) that p happened now.
func (l *loop) mark(p tracePoint) {
	if t := l.w.trace; t != nil {
		t(p, time.Now())
	}
}

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
	// In job ID order, not the order the handlers returned: Redis removes each lease from
	// active, a skiplist ordered by deadline then ID, and one claim's leases share a
	// deadline, so acks in ID order each find theirs near the front. A claim over limit
	// keys takes a key's jobs together, and their IDs are far apart: acks in the order
	// they ran cost Redis about 500 more instructions a job (callgrind).
	slices.SortFunc(acks, func(a, b *run) int { return strings.Compare(a.job.ID, b.job.ID) })
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
	w := l.handWaiter(q, n)
	l.callers.spawn(func() {
		ctx, cancel := context.WithTimeout(l.bg, reportTimeout)
		if n > 0 {
			l.mark(traceClaim)
		}
		acked, jobs, lim, registered, err := l.w.broker.AckClaimWaiting(ctx, q.name, fin, results, n, l.cfg.Lease, l.cfg.ID, w)
		if n > 0 {
			l.mark(traceClaimed)
		}
		cancel()
		l.postEvent(func() {
			if w != nil {
				l.handClaimed(q, lim.Now, registered, err)
			}
			l.exchanged(q, seq, n, now, acks, acked, jobs, lim, err)
		})
	})
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
		l.handClock(q, sent, now, lim.Now)
		if n > 0 {
			q.dry = len(jobs) < n && lim.By == ""
			q.hand.maybe = q.hand.maybe || q.dry // its next claim registers it for hand-offs
			if q.dry {
				q.lookAt = l.nextLook(now)
			}
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
	l.callers.spawn(func() {
		ctx, cancel := context.WithTimeout(l.bg, min(l.cfg.Lease/4, reportTimeout))
		lost, cancelled, err := l.w.broker.HeartbeatProgress(ctx, q.name, l.cfg.Lease, jobs, progress)
		cancel()
		l.postEvent(func() {
			l.progressAnswered(runs, progress, err, time.Now())
			l.beaten(q, runs, now, lost, cancelled, err)
		})
	})
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

// recheckEvery is how often an idle worker of n queues looks at each of them unasked:
// reaps its expired leases, promotes its due jobs, and claims from it after a wait that no
// wake token ended (covering a token lost with a crashed worker). Once a second up to 100
// queues; beyond, each less often, so that these calls stay near 100 a second of each
// kind: at once a second each, an idle worker of 1,000 queues made ~2,400 script calls a
// second. (Wake tokens and exact due times make the work itself prompt; this is the
// safety net.) Reaps are also at most half a lease apart.
func recheckEvery(n int) time.Duration {
	return max(time.Second, time.Duration(n)*10*time.Millisecond)
}

// nextLook is when a queue looked at now is looked at again unasked: recheck later, give
// or take a quarter when that is over a second, so that queues first looked at together
// (a thousand, at start) spread out rather than come due in one burst.
func (l *loop) nextLook(now time.Time) time.Time {
	d := l.recheck
	if d > time.Second {
		d = d*3/4 + rand.N(d/2)
	}
	return now.Add(d)
}

// maintain reaps q's expired leases (every recheck, at most half a lease) and promotes its
// due delayed and retrying jobs (when one is due, or a wake token or a reap asked).
func (l *loop) maintain(q *queueState, now time.Time) {
	reap, promote := !now.Before(q.nextReap), !now.Before(q.nextPromote)
	if promote {
		q.promoteAsked = false
	}
	q.maintaining = true
	l.calls++
	l.callers.spawn(func() {
		ctx, cancel := context.WithTimeout(l.bg, reportTimeout)
		defer cancel()
		var reaped, moved int
		next := time.Duration(-1)
		var err error
		if reap {
			reaped, _, err = l.w.broker.ReapDeliver(ctx, q.name)
		}
		if err == nil && (promote || reaped > 0) {
			promote = true
			moved, next, err = l.w.broker.Promote(ctx, q.name)
		}
		l.postEvent(func() { l.maintained(q, reap, promote, reaped, moved, next, err) })
	})
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
		q.nextReap = minTime(l.nextLook(now), now.Add(l.cfg.Lease/2))
		if reaped > 0 {
			l.log.LogAttrs(context.Background(), slog.LevelWarn, "reaped jobs whose lease expired",
				slog.String(attrQueue, q.name), slog.Int("jobs", reaped))
		}
	}
	if promote {
		wait := l.nextLook(now).Sub(now)
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

// wait blocks on the wake lists of the queues found empty, and this worker's hand lists
// on them, while there is room for a job and no wait runs: a job enqueued (or made due)
// on one of them wakes this worker, or is handed to it (handoff.go).
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
	l.callers.spawn(func() {
		q, token, job, err := l.w.broker.WaitHanded(l.bg, names, proto.MaxWait, l.waiter)
		switch {
		case job != nil:
			l.mark(traceHanded)
		case token != "":
			l.mark(traceWoken)
		}
		l.wakes <- wakeup{queue: q, token: token, job: job, err: err, on: on} // buffered 1: never blocks
	})
}

// woken takes the wait's outcome.
func (l *loop) woken(wu wakeup, now time.Time) {
	l.waiting = false
	if wu.err != nil {
		for _, q := range wu.on {
			q.dry = false // claims may work while waits fail: keep claiming
		}
		if q := l.byName[wu.queue]; q != nil {
			l.failed(q, wu.err, now)
			return
		}
		// Its own backoff: claims may succeed while waits keep failing (an ACL without
		// BLPOP, say).
		l.waitFails++
		delay := backoffDelay(l.waitFails, waitBackoffMax)
		l.waitRetry = now.Add(delay)
		l.log.LogAttrs(context.Background(), slog.LevelWarn, "wait failed; retrying",
			slog.String("error", wu.err.Error()), slog.Duration("retry_in", delay))
		return
	}
	l.waitFails = 0
	if wu.job != nil {
		l.handed(l.byName[wu.queue], wu.job, now)
		return
	}
	if wu.token == "" {
		for _, q := range wu.on {
			// Look again (covers wake tokens lost with a crashed worker): after every wait
			// up to 100 queues (a lost token costs at most one wait), else each queue once
			// a recheck at most.
			if l.recheck <= time.Second || !now.Before(q.lookAt) {
				q.dry = false
			}
			q.limit.woken()
		}
		return
	}
	q := l.byName[wu.queue]
	if q == nil || l.stopping || l.room() == 0 {
		l.passOn(wu) // we cannot use it: another idle worker can
		return
	}
	q.dry = false
	q.limit.woken() // a slot may have freed
	l.answered(q, now)
	if wu.token == proto.WakeScheduled {
		q.nextPromote = now // it may be due sooner than planned
		q.promoteAsked = q.maintaining
	}
	if wu.token == proto.WakeOutbox && !q.maintaining {
		q.nextReap = now // the reap's reply says the outbox holds entries: deliver them
	}
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
		// A Redis full to its maxmemory refuses the push; the token is only a hint (idle
		// workers look again within a second), so that is no news for the operator, who
		// hears of the full Redis from what matters (enqueues refused).
		level := slog.LevelWarn
		if redis.IsOOMError(err) {
			level = slog.LevelDebug
		}
		l.log.LogAttrs(ctx, level, "cannot pass on a wake token", slog.String("error", err.Error()))
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
