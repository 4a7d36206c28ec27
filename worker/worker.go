package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/internal/ident"
	"github.com/jobs-dev/jobs/lock"
	"github.com/jobs-dev/jobs/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for Config's zero fields.
const (
	DefaultConcurrency     = 10
	DefaultLease           = 30 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultAbandonGrace    = 5 * time.Second
)

// Config configures a Worker. Zero fields mean their documented defaults.
type Config struct {
	// Handler runs the jobs, usually a *Mux. Required.
	Handler Handler
	// Queues maps each queue to work on to its weight: a queue of weight 3 gets about three
	// times the claims of a queue of weight 1 while both have jobs, and no queue starves.
	// Default: {"default": 1}.
	Queues map[string]int
	// Concurrency is how many jobs run at once. Default: 10.
	Concurrency int
	// Lease is how long a claim lasts without renewal. Heartbeats renew it every Lease/3
	// while a job runs, so a live job never loses it; a crashed worker's jobs come back
	// about one Lease after it died. Shorter means faster recovery and more heartbeat
	// traffic. Default: 30s.
	Lease time.Duration
	// ShutdownTimeout is how long Run waits, once its context is cancelled, for running
	// jobs to finish before cancelling them and handing them back to their queues.
	// Default: 30s.
	ShutdownTimeout time.Duration
	// AbandonGrace is how long a handler may take to return once its context has ended
	// (timeout, lost lease, cancel, shutdown). Past it the handler is abandoned: the attempt
	// is recorded as failed and its slot runs the next job, while its goroutine, which
	// cannot be killed, stays blocked: one stuck handler cannot hold a slot or a shutdown
	// forever. Default: 5s.
	AbandonGrace time.Duration
	// BackoffFunc sets the wait before each retry. Default: DefaultBackoff.
	BackoffFunc BackoffFunc
	// Logger receives the worker's logs. Default: slog.Default().
	Logger *slog.Logger
	// ID names this worker in jobs (Job.Worker) and logs. Default: host:pid:random.
	ID string
	// Registerer receives the worker's Prometheus metrics (jobs_processed_total,
	// jobs_duration_seconds, jobs_worker_busy, jobs_worker_concurrency and the
	// scrape-time jobs_queue_depth). Default: nil, no metrics.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{queue.DefaultQueue: 1}
	}
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.AbandonGrace = cmp.Or(c.AbandonGrace, DefaultAbandonGrace)
	if c.BackoffFunc == nil {
		c.BackoffFunc = DefaultBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ID == "" {
		c.ID = ident.New()
	}
	return c
}

func (c Config) validate() error {
	if c.Handler == nil {
		return errors.New("worker: Config.Handler is nil")
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("worker: Config.Concurrency %d is negative", c.Concurrency)
	}
	if c.Lease < 100*time.Millisecond {
		return fmt.Errorf("worker: Config.Lease %s is under 100ms", c.Lease)
	}
	if c.ShutdownTimeout < 0 {
		return fmt.Errorf("worker: Config.ShutdownTimeout %s is negative", c.ShutdownTimeout)
	}
	if c.AbandonGrace < 0 {
		return fmt.Errorf("worker: Config.AbandonGrace %s is negative", c.AbandonGrace)
	}
	for q, w := range c.Queues {
		if err := queue.ValidateQueue(q); err != nil {
			return fmt.Errorf("worker: Config.Queues: %w", err)
		}
		if w <= 0 {
			return fmt.Errorf("worker: Config.Queues: weight %d of queue %q must be positive", w, q)
		}
	}
	return nil
}

// Worker claims jobs from its queues and runs them with its Handler.
type Worker struct {
	client *queue.Client
	locker *lock.Locker
	cfg    Config
	log    *slog.Logger
	queues []string // sorted, for deterministic logs and the wait call

	slots   *slots
	metrics *metrics // nil without Config.Registerer

	mu           sync.Mutex
	running      map[string]*run // by lease token: unique per claim, unlike the job ID
	stopCause    error           // set once shutdown ran out of time: jobs are cancelled with it
	deadlines    *time.Timer     // fires at nextDeadline (see deadlineLoop)
	nextDeadline time.Time       // the earliest deadline of a running job; zero: none
}

// run is one job being executed.
type run struct {
	job      *queue.Job
	cancel   context.CancelCauseFunc
	renewed  time.Time // last time its lease was known good (under Worker.mu)
	ctx      *jobCtx   // the handler's: ends at the deadline or with cancel
	deadline time.Time
	began    time.Time
	timeout  time.Duration
	unlock   func()      // releases an exclusive job's lock; nil for other jobs
	ended    time.Time   // when watchLoop first saw ctx ended (under Worker.mu)
	taken    atomic.Bool // the outcome is taken: by the handler's return or by abandonment
}

// New returns a Worker; it does nothing until Run.
func New(client *queue.Client, cfg Config) (*Worker, error) {
	if client == nil {
		return nil, errors.New("worker: nil queue client")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{client: client, locker: lock.New(client.Redis()), cfg: cfg, running: map[string]*run{}, deadlines: time.NewTimer(time.Hour),
		slots: newSlots(cfg.Concurrency, cfg.Lease)}
	w.deadlines.Stop()
	w.log = cfg.Logger.With(slog.String(attrWorker, cfg.ID))
	for q := range cfg.Queues {
		w.queues = append(w.queues, q)
	}
	sort.Strings(w.queues)
	m, err := newMetrics(cfg.Registerer, w)
	if err != nil {
		return nil, fmt.Errorf("worker: register metrics: %w", err)
	}
	w.metrics = m
	return w, nil
}

// ID returns the worker's ID.
func (w *Worker) ID() string { return w.cfg.ID }

// Run claims and runs jobs until ctx is cancelled. It then stops claiming, hands back
// the jobs it claimed ahead, lets running jobs finish within Config.ShutdownTimeout,
// cancels and hands back the rest so another worker takes them at once, and returns nil.
// It returns an error only when it cannot start.
func (w *Worker) Run(ctx context.Context) error {
	w.log.LogAttrs(ctx, slog.LevelInfo, "worker started",
		slog.Any("queues", w.cfg.Queues), slog.Int("concurrency", w.cfg.Concurrency),
		slog.Duration("lease", w.cfg.Lease))
	w.slots.start()
	w.mu.Lock()
	w.stopCause = nil
	w.mu.Unlock()
	// Jobs outlive ctx by up to ShutdownTimeout: their contexts are cancelled one by one
	// (stopRuns), not through a shared parent that every job would register with.
	jobsCtx := context.WithoutCancel(ctx)
	var jobs sync.WaitGroup

	hbCtx, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); w.heartbeatLoop(hbCtx) }()
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); w.watchLoop(hbCtx, &jobs) }()
	deadlinesDone := make(chan struct{})
	go func() { defer close(deadlinesDone); w.deadlineLoop(hbCtx) }()

	helpDone := make(chan struct{})
	go func() { defer close(helpDone); w.helpLoop(ctx, jobsCtx, &jobs) }()
	w.fetchLoop(ctx, jobsCtx, &jobs)
	<-helpDone

	w.slots.stop()
	w.handBackStale(ctx)
	w.log.LogAttrs(ctx, slog.LevelInfo, "worker stopping: waiting for running jobs",
		slog.Int("running", w.slots.running()), slog.Duration("shutdown_timeout", w.cfg.ShutdownTimeout))
	finished := make(chan struct{})
	go func() { jobs.Wait(); close(finished) }()
	timeout := time.NewTimer(w.cfg.ShutdownTimeout)
	defer timeout.Stop()
	// The running jobs' acks are still carried here, as the fetch loop did.
	for done := false; !done; {
		select {
		case <-finished:
			done = true
		case <-w.slots.freed:
		case <-timeout.C:
			w.log.LogAttrs(ctx, slog.LevelWarn, "shutdown timeout: cancelling and handing back running jobs",
				slog.Int("running", w.slots.running()))
			w.stopRuns(errShutdown)
		}
		if _, err := w.exchange(ctx, 0); err != nil {
			w.log.LogAttrs(ctx, slog.LevelError, "Redis call failed while stopping",
				slog.String("error", err.Error()))
		}
		w.handBackStale(ctx)
	}
	stopHeartbeat()
	<-hbDone
	<-watchDone
	<-deadlinesDone
	w.log.LogAttrs(ctx, slog.LevelInfo, "worker stopped")
	return nil
}

// fetchLoop carries acks and claims for every slot until ctx is cancelled: each round
// acks the jobs that succeeded since the last and claims for the free slots (and the
// claim-ahead buffer) in one script call per queue. With nothing to claim it waits for
// whichever comes first: a wake token (a job arrived), the next delayed job's due time (a
// local timer: Redis's own BLPOP timeout is only as precise as its 100ms tick), or the
// next reap; acks that come meanwhile are still sent at once.
func (w *Worker) fetchLoop(ctx, jobsCtx context.Context, jobs *sync.WaitGroup) {
	var nextPromote, nextReap time.Time // zero: due now
	var waiting chan wakeup             // non-nil while a Wait runs
	idle := false                       // the last claim found nothing: wait to be woken
	errDelay, waitDelay := time.Duration(0), time.Duration(0)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		nextStale := w.handBackStale(ctx)
		w.slots.dry.Store(idle)
		want := 0
		if !idle {
			want = w.slots.reserve()
		}
		if want > 0 || w.slots.hasAcks() {
			var err error
			if want > 0 {
				if err = w.maintain(ctx, time.Now(), &nextPromote, &nextReap); err != nil {
					w.slots.place(nil, time.Time{}, want)
					want = 0 // still send the acks
				}
			}
			sent := time.Now()
			claimed, xerr := w.exchange(ctx, want)
			// Jobs claimed before an error (from another queue) hold leases: run them.
			w.start(jobsCtx, claimed, sent, want, jobs)
			if err = cmp.Or(err, xerr); err != nil {
				if ctx.Err() != nil {
					return
				}
				// Redis is down or refusing: back off (100ms doubling to 5s) instead of spinning.
				errDelay = min(max(errDelay*2, 100*time.Millisecond), 5*time.Second)
				w.log.LogAttrs(ctx, slog.LevelError, "Redis call failed; retrying",
					slog.String("error", err.Error()), slog.Duration("retry_in", errDelay))
				select {
				case <-time.After(errDelay):
				case <-ctx.Done():
				}
				continue
			}
			errDelay = 0
			if want <= 0 || len(claimed) > 0 {
				continue
			}
			idle = true
			w.slots.dry.Store(true)
		}
		if idle && waiting == nil {
			waiting = make(chan wakeup, 1)
			go w.wait(ctx, waiting)
		}
		wakeAt := nextStale // zero: nothing buffered
		if idle && (wakeAt.IsZero() || minTime(nextPromote, nextReap).Before(wakeAt)) {
			wakeAt = minTime(nextPromote, nextReap)
		}
		var timerC <-chan time.Time
		if !wakeAt.IsZero() {
			timer.Reset(time.Until(wakeAt))
			timerC = timer.C
		}
		select {
		case <-w.slots.freed: // a slot came free or an ack waits
		case wu := <-waiting:
			waiting = nil
			if !idle && want <= 0 {
				w.passOn(ctx, wu) // we cannot use it: another idle worker can
				break
			}
			idle = false
			if wu.err != nil && ctx.Err() == nil {
				// Its own backoff: claims may succeed while waits keep failing (an ACL
				// without BLPOP, say), and then errDelay is reset on every pass.
				waitDelay = min(max(waitDelay*2, 100*time.Millisecond), 5*time.Second)
				w.log.LogAttrs(ctx, slog.LevelWarn, "wait failed; retrying",
					slog.String("error", wu.err.Error()), slog.Duration("retry_in", waitDelay))
				select {
				case <-time.After(waitDelay):
				case <-ctx.Done():
				}
			} else {
				waitDelay = 0
			}
			if wu.token == queue.WakeScheduled {
				nextPromote = time.Time{} // it may be due sooner than we planned for
			}
		case <-timerC:
			if idle && !time.Now().Before(minTime(nextPromote, nextReap)) {
				idle = false
			}
		case <-ctx.Done():
		}
		timer.Stop()
	}
}

// helpLoop carries acks and claims beside fetchLoop, so that while one loop's call is in
// Redis the other can prepare, send or unpack the next: Redis is not left idle while the
// worker handles a reply, nor the worker while Redis runs a call. It claims only while
// fetchLoop is not waiting for work, and leaves waiting, promoting, reaping and backing
// off to fetchLoop.
func (w *Worker) helpLoop(ctx, jobsCtx context.Context, jobs *sync.WaitGroup) {
	for {
		select {
		case <-w.slots.help:
		case <-ctx.Done():
			return
		}
		for ctx.Err() == nil {
			want := 0
			if !w.slots.dry.Load() {
				want = w.slots.reserve()
			}
			if want == 0 && !w.slots.hasAcks() {
				break
			}
			sent := time.Now()
			claimed, err := w.exchange(ctx, want)
			w.start(jobsCtx, claimed, sent, want, jobs)
			if want > 0 {
				// The room this call reserved is free again, or the queue ran dry: fetchLoop,
				// which may have found no room to claim for, looks again (and on an empty
				// queue goes to wait for work).
				select {
				case w.slots.freed <- struct{}{}:
				default:
				}
			}
			if err != nil || (want > 0 && len(claimed) == 0) {
				break // fetchLoop meets the error or the empty queue too, and handles it
			}
		}
	}
}

// wakeup is the outcome of one Wait.
type wakeup struct {
	queue, token string
	err          error
}

// wait runs one Wait on the worker's queues and delivers its outcome. A token that
// arrives after the worker stopped is passed on, so no idle worker misses it.
func (w *Worker) wait(ctx context.Context, out chan<- wakeup) {
	q, token, err := w.client.Wait(ctx, w.queues, queue.MaxWait)
	wu := wakeup{q, token, err}
	if ctx.Err() != nil {
		w.passOn(context.WithoutCancel(ctx), wu)
	}
	out <- wu
}

// passOn pushes back a wake token this worker popped but will not act on.
func (w *Worker) passOn(ctx context.Context, wu wakeup) {
	if wu.token == "" || wu.queue == "" {
		return
	}
	if err := w.client.Wake(ctx, wu.queue, wu.token); err != nil {
		w.log.LogAttrs(ctx, slog.LevelWarn, "cannot pass on a wake token", slog.String("error", err.Error()))
	}
}

// maintain promotes due jobs when one is due (or a wake token asked) and reaps expired
// leases about once per second, then sets when each should run next.
func (w *Worker) maintain(ctx context.Context, now time.Time, nextPromote, nextReap *time.Time) error {
	if !now.Before(*nextReap) {
		*nextReap = now.Add(min(time.Second, w.cfg.Lease/2))
		for _, q := range w.queues {
			n, err := w.client.Reap(ctx, q)
			if err != nil {
				return err
			}
			if n > 0 {
				w.log.LogAttrs(ctx, slog.LevelWarn, "reaped jobs whose lease expired",
					slog.String(attrQueue, q), slog.Int("jobs", n))
				*nextPromote = time.Time{} // reaped jobs are due at once
			}
		}
	}
	if now.Before(*nextPromote) {
		return nil
	}
	wait := queue.MaxWait
	for _, q := range w.queues {
		_, next, err := w.client.Promote(ctx, q)
		if err != nil {
			return err
		}
		if next >= 0 {
			wait = min(wait, next)
		}
	}
	*nextPromote = now.Add(wait)
	return nil
}

// exchange sends the acks waiting in the slots and claims up to want jobs, one
// AckClaim call per queue. The claims share the slots among the queues by weight: each
// slot goes to a queue drawn with probability weight/total. If the drawn queues are
// empty, the others are tried in turn so a slot never idles while any queue has work.
func (w *Worker) exchange(ctx context.Context, want int) ([]*queue.Job, error) {
	acks := w.slots.takeAcks()
	// The call settles jobs already run and claims jobs it must hand back if the worker
	// stops: it is not cut short by ctx, only bounded.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	byQueue := map[string][]finished{}
	for _, f := range acks {
		byQueue[f.job.Queue] = append(byQueue[f.job.Queue], f)
	}
	share := w.share(want)
	var got []*queue.Job
	var firstErr error
	call := func(q string, n int) {
		sent := byQueue[q]
		delete(byQueue, q)
		fin := make([]queue.Finished, len(sent))
		for i, f := range sent {
			fin[i] = queue.Finished{Job: f.job, Result: f.result}
		}
		acked, jobs, err := w.client.AckClaim(rctx, q, fin, n, w.cfg.Lease, w.cfg.ID)
		for i, f := range sent {
			if acked == nil {
				// The call failed, maybe before the acks: the job comes back after its
				// lease if so (at-least-once).
				w.acked(rctx, f, err)
			} else {
				w.acked(rctx, f, acked[i])
			}
		}
		got = append(got, jobs...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, q := range w.queues {
		if share[q] > 0 || len(byQueue[q]) > 0 {
			call(q, share[q])
		}
	}
	if len(got) > 0 || want <= 0 || len(w.queues) == 1 || firstErr != nil {
		return got, firstErr
	}
	for _, q := range w.queues {
		if share[q] > 0 {
			continue
		}
		if call(q, want); firstErr != nil || len(got) > 0 {
			break
		}
	}
	return got, firstErr
}

// share draws which queue each of n slots claims from, by weight.
func (w *Worker) share(n int) map[string]int {
	share := map[string]int{}
	if n <= 0 {
		return share
	}
	if len(w.queues) == 1 {
		share[w.queues[0]] = n
		return share
	}
	total := 0
	for _, q := range w.queues {
		total += w.cfg.Queues[q]
	}
	for range n {
		r := rand.N(total)
		for _, q := range w.queues {
			if r -= w.cfg.Queues[q]; r < 0 {
				share[q]++
				break
			}
		}
	}
	return share
}

// heartbeatLoop renews the leases of running jobs every Lease/3, one script call per
// queue for all of its jobs. A job whose lease is reported lost, or could not be renewed
// for a whole lease (Redis unreachable), is cancelled: another worker may run it now. A
// job an operator cancelled (`jobs cancel`) is cancelled too; its failure goes to dead.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		byQueue := map[string][]*run{}
		w.mu.Lock()
		for _, r := range w.running {
			byQueue[r.job.Queue] = append(byQueue[r.job.Queue], r)
		}
		w.mu.Unlock()
		for q, runs := range byQueue {
			jobs := make([]*queue.Job, len(runs))
			for i, r := range runs {
				jobs[i] = r.job
			}
			sent := time.Now()
			lost, cancelled, err := w.client.Heartbeat(ctx, q, w.cfg.Lease, jobs)
			if err != nil {
				w.log.LogAttrs(ctx, slog.LevelWarn, "heartbeat failed",
					slog.String(attrQueue, q), slog.String("error", err.Error()))
			}
			isLost, isCancelled := map[string]bool{}, map[string]bool{}
			for _, token := range lost {
				isLost[token] = true
			}
			for _, token := range cancelled {
				isCancelled[token] = true
			}
			w.mu.Lock()
			for _, r := range runs {
				switch {
				case isLost[r.job.Lease]:
					r.cancel(errLeaseLost)
				case isCancelled[r.job.Lease]:
					r.renewed = sent
					r.cancel(errCancelled)
				case err == nil:
					r.renewed = sent
				case time.Since(r.renewed) > w.cfg.Lease:
					r.cancel(errLeaseLost)
				}
			}
			w.mu.Unlock()
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
