package worker

import (
	"cmp"
	"container/heap"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// loop is one Run of a Worker: a single goroutine that owns every piece of run state (the
// runs and their states, the claim-ahead buffer, pending acks, lease deadlines, cancel
// flags, per-queue schedules and backoffs) and changes it only in reaction to events:
//
//   - a slot's handler returned (results);
//   - a Redis call's reply (events): exchange (ack+claim), heartbeat, promote and reap,
//     settle (fail, hand back, postpone), the registry beat (with an operator's order);
//   - the wait's wake token (wakes), an operator's cancel notice (events);
//   - the one timer, set to the nearest due time: a watchdog or abandonment, a buffered
//     job going stale, the next heartbeat, promotion or reap, the next registry beat, a
//     backoff's end, the shutdown timeout;
//   - Run's context ending.
//
// Redis calls run on goroutines of their own and report back through events, so nothing
// ever blocks the loop; slots are goroutines that only run handlers. No state is shared:
// there is no mutex in the worker.
type loop struct {
	w        *Worker
	cfg      Config
	log      *slog.Logger
	handler  Handler
	jobsBase context.Context // parent of every handler's context: Run's values, never its cancellation
	bg       context.Context // for Redis calls: lives until the loop has exited

	results chan result
	events  chan func()
	wakes   chan wakeup   // buffered 1: at most one wait runs
	exited  chan struct{} // closed when the loop returns: late senders give up
	callers callers       // goroutines for the Redis calls (callers.go)

	queues []*queueState // sorted by name
	byName map[string]*queueState
	runs   map[string]*run // every run not yet settled, by lease token
	buffer []*run          // claimed ahead, in the order they are to start
	// keyHeld: runs taken out of the buffer because a handler paused their limit key,
	// by the paused run, handed back when its pause call ends (holdKey).
	keyHeld map[*run][]*run
	// keyPausing: the run whose handler pauses its queue's limit key, by queue and key,
	// while its pause call is in flight: jobs of the key claimed meanwhile are held too.
	keyPausing map[string]keyPause
	oldest     time.Time // no buffered run was renewed before this
	slots      map[*slot]struct{}
	idle       []*slot
	starting   []*run // started in this turn of the loop, handed to their slots at its end (dispatch)
	timers     timers // running runs by checkAt

	busy     int           // slots running a handler
	reserved int           // jobs that claims in flight may bring
	held     int           // jobs claimed but held back for order (see placeHeld)
	calls    int           // Redis calls in flight that Run waits for before it returns
	recheck  time.Duration // recheckEvery for its queues

	waiter    *proto.Waiter // this worker's registration for hand-offs (handoff.go); nil: none
	waiting   bool          // a wait is in flight
	waitFails int
	waitRetry time.Time

	nextBeat time.Time
	reg      registration // the worker's entry in the registry of live processes (registry.go)

	quiet     bool // an operator's `jobs workers quiet`: claim nothing more
	stopping  bool
	stopAt    time.Time // when running jobs are cancelled and handed back
	stopFired bool

	avg        time.Duration // moving average of handler durations: claim ahead while short
	aheadUntil time.Duration
	staleAfter time.Duration

	timer   *time.Timer
	timerAt time.Time // zero: the timer is stopped

	warned map[string]time.Time // job types without a handler, last logged

	prog progressState // handlers' progress (progress.go)
	hist history       // the metrics history (history.go)
}

// queueState is what the loop knows of one of its queues.
type queueState struct {
	name   string
	weight int
	share  int // claims drawn for it in this exchange

	// dry: the last claim found it empty; claim again after a wake token, a promotion or
	// reap that moved jobs, or the end of a wait.
	dry bool
	// lookAt: once the last claim found it empty, when the end of a wait that no token
	// ended looks at it again (nextLook).
	lookAt   time.Time
	acks     []*run // succeeded runs, acked by its next exchange call
	inflight int    // exchange calls in flight (at most 2)
	claiming int    // of which claim jobs (see mayClaim)
	sent     uint64 // exchange calls sent; replies are placed in this order
	placed   uint64
	replies  map[uint64]claimReply

	nextPromote, nextReap time.Time
	maintaining, beating  bool
	// promoteAsked: a wake token for a due job came while a maintain call was in flight,
	// whose reply must not push the next promotion back.
	promoteAsked bool
	// beatMissed: a heartbeat round skipped this queue (its last beat was in flight).
	beatMissed bool

	failures int       // consecutive failed calls
	retryAt  time.Time // no call before this after a failure

	limit limitState // what its last claim met of the queue's limits (limit.go)
	hand  handState  // this worker's registration for hand-offs on the queue (handoff.go)
}

type claimReply struct {
	jobs []*queue.Job
	sent time.Time
	// got is when the reply came, redis Redis's time when the claim ran: a job whose
	// StartedAt is after redis starts StartedAt - redis after got (see run.notBefore).
	got, redis time.Time
}

// wakeup is the outcome of one wait: a wake token, or a job handed to this worker.
type wakeup struct {
	queue, token string
	job          *queue.Job
	err          error
	on           []*queueState
}

// aheadMin is the buffer's size at low concurrency (while handlers are short): a worker
// of concurrency 10 claims up to 64 jobs per round trip, not 10.
const aheadMin = 64

func newLoop(w *Worker, ctx context.Context) *loop {
	cfg := w.cfg
	until := min(cfg.Lease/40, 125*time.Millisecond)
	l := &loop{w: w, cfg: cfg, log: w.log, jobsBase: context.WithoutCancel(ctx),
		handler: &exclusive{next: cfg.Handler, locker: w.locker, client: w.client, ttl: 2 * cfg.Lease, log: w.log},
		results: make(chan result, cfg.Concurrency), events: make(chan func(), 16),
		wakes: make(chan wakeup, 1), exited: make(chan struct{}),
		byName: map[string]*queueState{}, runs: map[string]*run{}, slots: map[*slot]struct{}{},
		timers: timers{lease: cfg.Lease}, aheadUntil: until, staleAfter: min(cfg.Lease/10, 500*time.Millisecond),
		// Unknown handlers are assumed slow until a few have been timed, so a worker of
		// long jobs never claims ahead.
		avg: until, warned: map[string]time.Time{},
		prog:    progressState{bell: make(chan struct{}, 1)},
		callers: callers{work: make(chan func())},
		hist:    history{every: cfg.HistoryInterval, pending: map[historyKey]*proto.MetricsSample{}}}
	for _, name := range w.queues {
		// hand.maybe: a hand list left by an earlier run of this ID is drained by the
		// first claim.
		q := &queueState{name: name, weight: cfg.Queues[name], replies: map[uint64]claimReply{}, hand: handState{maybe: true}}
		l.queues = append(l.queues, q)
		l.byName[name] = q
	}
	l.recheck = recheckEvery(len(l.queues))
	l.callers.exited = l.exited
	if l.recheck <= proto.MaxWait {
		// A worker of more queues looks at each less often than a registration lasts:
		// its waits would renew none, and each claim would carry its waiter for nothing.
		waiter := w.broker.Waiter(cfg.ID, cfg.Lease)
		l.waiter = &waiter
	}
	return l
}

// run is the loop itself; it returns once ctx has ended and every run is settled.
func (l *loop) run(ctx context.Context) {
	bg, stopCalls := context.WithCancel(context.WithoutCancel(ctx))
	l.bg = bg
	// The last history flush runs once the calls are stopped (a wait still in flight
	// then ends at once, as without it), on its own bounded context.
	defer l.flushHistoryAtExit(ctx)
	defer stopCalls()
	l.timer = time.NewTimer(time.Hour)
	l.timer.Stop()
	defer l.timer.Stop()
	for range l.cfg.Concurrency {
		l.idle = append(l.idle, l.newSlot())
	}
	go l.watchCancels(bg)
	stop := ctx.Done()
	for {
		now := time.Now()
		l.step(now)
		l.dispatch()
		if l.stopping && (len(l.runs) == 0 && l.calls == 0 || !now.Before(l.giveUpAt())) {
			if len(l.runs) > 0 || l.calls > 0 {
				l.log.LogAttrs(context.Background(), slog.LevelError,
					"Redis calls still unanswered at the end of the shutdown; their jobs come back after their lease",
					slog.Int("jobs", len(l.runs)), slog.Int("calls", l.calls))
			}
			break
		}
		l.arm(now)
		select {
		case res := <-l.results:
			now = time.Now()
			l.finish(res, now)
			// Take every outcome already waiting, so one exchange carries their acks.
			for more := true; more; {
				select {
				case res = <-l.results:
					l.finish(res, now)
				default:
					more = false
				}
			}
		case f := <-l.events:
			f()
		case wu := <-l.wakes:
			l.woken(wu, time.Now())
		case <-l.prog.bell:
			l.progressRang(time.Now())
		case <-l.timer.C:
			l.timerAt = time.Time{}
		case <-stop:
			stop = nil
			l.beginStop(time.Now())
		}
	}
	close(l.exited)
	for s := range l.slots {
		close(s.in) // idle slots end; an abandoned one ends when its handler returns
	}
	if l.waiting {
		// Its token, if any, belongs to another worker now, and a job handed to this one
		// goes back to ready. The wait may block up to a second more, so Run does not
		// wait for it; nor does this goroutine log once Run has returned: a token lost
		// here costs an idle worker at most one MaxWait, a handed job its lease (the
		// reaper puts it back).
		go func() {
			wu := <-l.wakes
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), passOnTimeout)
			defer cancel()
			switch {
			case wu.job != nil: // claimed for this worker: another takes it at once
				_ = l.w.broker.HandBack(wctx, wu.job, 0)
			case wu.token != "" && wu.queue != "":
				_ = l.w.broker.Wake(wctx, wu.queue, wu.token)
			}
		}()
	}
}

// step does whatever is due at now. It is called after every event.
func (l *loop) step(now time.Time) {
	l.checkTimers(now)
	if l.stopping && !l.stopFired && !now.Before(l.stopAt) {
		l.stopFired = true
		n := 0
		for _, r := range l.runs {
			if r.state == running {
				l.stopRun(r, ErrShutdown, now)
				n++
			}
		}
		if n > 0 {
			l.log.LogAttrs(context.Background(), slog.LevelWarn,
				"shutdown timeout: cancelling and handing back running jobs", slog.Int("running", n))
		}
	}
	if len(l.buffer) > 0 && (l.stopping || now.Sub(l.oldest) >= l.staleAfter) {
		l.handBackStale(now)
	}
	switch {
	case len(l.runs) == len(l.buffer):
		// Nothing to renew: the first job to start is renewed a third of a lease later.
		l.nextBeat = now.Add(l.cfg.Lease / 3)
	case !now.Before(l.nextBeat):
		l.heartbeat(now)
	}
	l.progressStep(now)
	if !l.stopping {
		for _, q := range l.queues {
			if !q.maintaining && !now.Before(q.retryAt) && (!now.Before(q.nextReap) || !now.Before(q.nextPromote)) {
				l.maintain(q, now)
			}
		}
	}
	l.beatRegistry(now)
	l.exchange(now)
	l.wait(now)
	l.historyStep(now)
}

// arm sets the timer to the nearest due time after now.
func (l *loop) arm(now time.Time) {
	var next time.Time
	at := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if len(l.timers.runs) > 0 {
		at(l.timers.runs[0].checkAt(l.cfg.Lease))
	}
	if len(l.buffer) > 0 {
		at(l.oldest.Add(l.staleAfter))
	}
	if len(l.runs) > len(l.buffer) {
		at(l.nextBeat)
	}
	if !l.reg.beating {
		at(l.reg.next)
	}
	if l.stopping {
		if !l.stopFired {
			at(l.stopAt)
		}
		at(l.giveUpAt())
	}
	for _, q := range l.queues {
		if now.Before(q.limit.until) {
			at(q.limit.until)
		}
		switch {
		case now.Before(q.retryAt):
			at(q.retryAt)
		case !l.stopping && !q.maintaining:
			at(q.nextReap)
			at(q.nextPromote)
		}
	}
	if !l.waiting && now.Before(l.waitRetry) {
		at(l.waitRetry)
	}
	if !l.prog.due.IsZero() {
		at(l.prog.due)
	}
	if !l.hist.flushAt.IsZero() && !l.hist.flushing {
		at(l.hist.flushAt)
	}
	if next.Equal(l.timerAt) {
		return
	}
	l.timerAt = next
	if next.IsZero() {
		l.timer.Stop()
		return
	}
	l.timer.Reset(max(next.Sub(now), 0))
}

// start runs r on slot s.
func (l *loop) start(r *run, s *slot, now time.Time) {
	ctx, cancel := context.WithCancelCause(l.jobsBase)
	r.progress = &progressBox{bell: l.prog.bell, rung: &l.prog.rung}
	r.start(s, ctx, cancel, now, l.cfg.AbandonGrace, l.cfg.Types[r.job.Type])
	l.busy++
	heap.Push(&l.timers, r)
	l.w.metrics.setBusy(int64(l.busy))
	l.starting = append(l.starting, r)
}

// dispatch hands the runs started in this turn of the loop to their slots, after the
// turn's Redis calls were handed to their goroutines (step): Go runs the goroutine made
// ready last first on this thread once the loop blocks, so the handler starts before a
// claim's goroutine does its write (which put it 30-45 us later at idle: the slot waited
// behind the call's syscalls, or for another thread to wake and steal it).
func (l *loop) dispatch() {
	for i, r := range l.starting {
		r.slot.in <- r // buffered 1, and the slot is idle: never blocks
		l.starting[i] = nil
	}
	l.starting = l.starting[:0]
}

// finish takes a slot's report: the slot runs the next buffered job or waits, and the
// outcome is recorded (an ack waits for the next exchange of its queue).
func (l *loop) finish(res result, now time.Time) {
	r, s, o := res.run, res.slot, res.o
	if o.exited {
		delete(l.slots, s)
	}
	if r.state == abandoned {
		// A late outcome: the attempt was settled when it was abandoned.
		if !o.exited {
			delete(l.slots, s)
			close(s.in)
		}
		return
	}
	heap.Remove(&l.timers, r.index)
	l.busy--
	l.timed(o.took)
	r.returned(o)
	if o.exited {
		s = l.newSlot()
	}
	if pausesKey(o.err) {
		l.holdKey(r, o.err) // before the slot takes the next buffered job
	}
	l.refill(s, now)
	if l.closeProgress(r, o) {
		return // settled once its last progress is sent
	}
	l.settleOutcome(r, o)
}

// settleOutcome records the outcome of a run whose handler returned: an ack waits for the
// next exchange of its queue.
func (l *loop) settleOutcome(r *run, o outcome) {
	if o.err == nil {
		r.q.acks = append(r.q.acks, r)
		return
	}
	l.settleFailure(r, o)
}

// refill gives slot s the next buffered job that is still fresh, or makes it idle.
func (l *loop) refill(s *slot, now time.Time) {
	if len(l.buffer) > 0 && !l.stopping && now.Sub(l.buffer[0].renewed) >= l.staleAfter {
		l.handBackStale(now)
	}
	if len(l.buffer) > 0 && !l.stopping {
		r := l.buffer[0]
		l.buffer = l.buffer[1:]
		l.start(r, s, now)
		return
	}
	l.idle = append(l.idle, s)
	l.w.metrics.setBusy(int64(l.busy))
}

// handBackStale hands back, in one call, the buffered runs that went stale (all of them
// when stopping), and finds the oldest renewal among those left.
func (l *loop) handBackStale(now time.Time) {
	var stale []*run
	keep := l.buffer[:0]
	for _, r := range l.buffer {
		if l.stopping || now.Sub(r.renewed) >= l.staleAfter {
			stale = append(stale, r)
			continue
		}
		if len(keep) == 0 || r.renewed.Before(l.oldest) {
			l.oldest = r.renewed
		}
		keep = append(keep, r)
	}
	clear(l.buffer[len(keep):])
	l.buffer = keep
	if len(stale) > 0 {
		if !l.stopping {
			l.slowed()
		}
		l.handBack(stale)
	}
}

func (l *loop) newSlot() *slot {
	s := &slot{in: make(chan *run, 1)}
	l.slots[s] = struct{}{}
	go l.slotMain(s)
	return s
}

// checkTimers fires the watchdogs and abandonments that are due.
func (l *loop) checkTimers(now time.Time) {
	var watched []*run
	defer func() {
		if len(watched) > 0 { // one record for all: they share their heartbeats
			l.log.LogAttrs(context.Background(), slog.LevelWarn,
				"leases could not be renewed: cancelling their jobs before another worker may take them",
				slog.Int("jobs", len(watched)), slog.String(attrJobID, watched[0].job.ID),
				slog.Duration("since_renewed", now.Sub(watched[0].renewed)))
		}
	}()
	for len(l.timers.runs) > 0 {
		r := l.timers.runs[0]
		if r.checkAt(l.cfg.Lease).After(now) {
			return
		}
		if r.cause == nil && now.Before(r.abandonAt) {
			// The watchdog: no renewal for five sixths of the lease.
			watched = append(watched, r)
			l.stopRun(r, ErrLeaseExpiring, now)
			continue
		}
		heap.Remove(&l.timers, r.index)
		r.abandon()
		l.busy--
		l.refill(l.newSlot(), now)
		cause := cmp.Or(r.cause, context.DeadlineExceeded)
		l.settleFailure(r, outcome{err: errAbandoned(l.cfg.AbandonGrace), cause: cause, took: now.Sub(r.started)})
	}
}

// stopRun cancels a running run's handler with cause.
func (l *loop) stopRun(r *run, cause error, now time.Time) {
	r.stop(cause, now, l.cfg.AbandonGrace)
	if r.index >= 0 {
		heap.Fix(&l.timers, r.index)
	}
}

// cancelRun acts on an operator's cancel of a run's job: a running handler's context is
// cancelled, a buffered job handed back (the script sends it to dead).
func (l *loop) cancelRun(r *run, now time.Time) {
	r.cancelled = true
	switch r.state {
	case running:
		l.stopRun(r, ErrCancelled, now)
	case buffered:
		if i := slices.Index(l.buffer, r); i >= 0 {
			l.buffer = slices.Delete(l.buffer, i, i+1)
			l.handBack([]*run{r})
		}
	}
}

// beginStop starts the shutdown: no more claims, buffered jobs handed back (by step),
// running jobs cancelled at the shutdown timeout.
func (l *loop) beginStop(now time.Time) {
	if l.stopping {
		return // ordered to stop (registry.go), then Run's context ended: one shutdown
	}
	l.stopping = true
	l.reg.next = now // the registry shows "stopping" at once
	l.stopAt = now.Add(l.cfg.ShutdownTimeout)
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "worker stopping: waiting for running jobs",
		slog.Int("running", l.busy), slog.Duration("shutdown_timeout", l.cfg.ShutdownTimeout))
}

// giveUpAt is when a stopping worker stops waiting for Redis calls that never came back
// (a network that swallows them, with no read timeout).
func (l *loop) giveUpAt() time.Time {
	return l.stopAt.Add(l.cfg.AbandonGrace + 2*reportTimeout)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// backoffDelay is the wait after n consecutive failures: 100ms doubling to most.
func backoffDelay(n int, most time.Duration) time.Duration {
	return min(100*time.Millisecond<<min(n-1, 10), most)
}

// Backoff caps. A queue's calls retry at least once a second, so a worker is back within
// about a second of Redis (or the queue's cluster master) coming back; a failing call
// costs little. A failing wait retries less often: claims go on without it.
const (
	queueBackoffMax = time.Second
	waitBackoffMax  = 5 * time.Second
)

// answered records that q's node answered a call: a backoff of q ends now, and so does
// the wait's when q was failing too (the same outage, say a restart, most likely broke
// both; without this an idle worker would see no wake token for up to waitBackoffMax).
func (l *loop) answered(q *queueState, now time.Time) {
	if q.failures == 0 {
		return
	}
	q.failures = 0
	q.retryAt = minTime(q.retryAt, now)
	l.waitRetry = minTime(l.waitRetry, now)
}

// failed records a failed call on q: q alone backs off, the other queues go on.
func (l *loop) failed(q *queueState, err error, now time.Time) {
	if now.Before(q.retryAt) {
		return // another call of this round failed too: one backoff step per round
	}
	q.failures++
	delay := backoffDelay(q.failures, queueBackoffMax)
	q.retryAt = now.Add(delay)
	l.log.LogAttrs(context.Background(), slog.LevelError, "Redis call failed; retrying",
		slog.String(attrQueue, q.name), slog.String("error", err.Error()), slog.Duration("retry_in", delay))
}
