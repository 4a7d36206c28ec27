package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/ident"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/lock"
	"github.com/jobs-dev/jobs/queue"
)

// Defaults for Config's zero fields.
const (
	DefaultConcurrency     = 10
	DefaultLease           = 30 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultAbandonGrace    = 5 * time.Second
	DefaultBeat            = proto.DefaultBeat
)

// MaxWeight is the largest weight of a queue in Config.Queues. The worker draws each
// claim with probability weight/total, so the total must not overflow (two weights near
// MaxInt64 panicked a worker); 1000 to 1 is a finer ratio than any deployment needs.
const MaxWeight = 1000

// TypePolicy overrides, for the jobs of one type, what the job itself or the worker's
// Config says. Zero fields leave those as they are.
type TypePolicy struct {
	// Timeout of each attempt, replacing the job's own (set when it was enqueued, 30 min
	// by default): the handler's author knows best how long its work may take.
	Timeout time.Duration
	// MaxRetry bounds the retries: a failed attempt past the MaxRetry+1th sends the job
	// to the dead set, even if the job allows more (the job's own max_retry still bounds
	// it when lower). To never retry a type, return SkipRetry from its handler.
	MaxRetry int
	// Backoff replaces Config.BackoffFunc for the type.
	Backoff BackoffFunc
}

// Config configures a Worker. Zero fields mean their documented defaults.
type Config struct {
	// Handler runs the jobs, usually a *Mux. Required.
	Handler Handler
	// Queues maps each queue to work on to its weight: a queue of weight 3 gets about three
	// times the claims of a queue of weight 1 while both have jobs, and no queue starves.
	// Weights are 1 to MaxWeight. Default: {"default": 1}.
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
	// Types sets, per job type, a timeout, backoff or retry bound that replaces what the
	// job or this Config says for the jobs of that type (see TypePolicy).
	Types map[string]TypePolicy
	// OnError, when set, is called after each failed attempt is recorded, with a copy of
	// the job (State retry or dead, LastError set) and the handler's error: a
	// *PanicError, with the stack, for a panic. OnDead, when set, is called too when the
	// failure sent the job to the dead set. They run on a goroutine of the worker's,
	// never a handler's, once per recorded failure: keep them quick (alerting, logging).
	// Each runs on the goroutine of the call that recorded the failure, so the calls of a
	// job retried within milliseconds may come out of order: State says which is which.
	// Not called for a snooze, a hand back at shutdown, or a job whose lease was lost.
	OnError func(job *queue.Job, err error)
	OnDead  func(job *queue.Job, err error)
	// Logger receives the worker's logs. Default: slog.Default().
	Logger *slog.Logger
	// ID names this worker in jobs (Job.Worker), logs and the registry of live processes;
	// two live workers must not share one. Default: host:pid:random.
	ID string
	// HistoryInterval is how often the worker adds up what it ran (per queue, job type and
	// minute: attempts, failures, run and wait times) to the metrics history in Redis that
	// queue's Client.History and `jobs stats --history` read, in one round trip; it also
	// flushes when it stops. Negative turns the history off for this worker. Default: 10s.
	HistoryInterval time.Duration
	// Beat is how often the worker renews its entry in the registry of live processes
	// (`jobs workers`, queue.Client.Processes): one script call per beat. The entry
	// expires three beats after the last renewal, so a killed worker leaves the list
	// within three beats; an operator's quiet or stop is obeyed within one. Shorter means
	// a fresher list and more calls. At least 100ms. Default: 5s.
	Beat time.Duration
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
	c.HistoryInterval = cmp.Or(c.HistoryInterval, DefaultHistoryInterval)
	c.Beat = cmp.Or(c.Beat, DefaultBeat)
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
	if c.Beat < 100*time.Millisecond {
		return fmt.Errorf("worker: Config.Beat %s is under 100ms", c.Beat)
	}
	if c.AbandonGrace < 0 {
		return fmt.Errorf("worker: Config.AbandonGrace %s is negative", c.AbandonGrace)
	}
	for typ, p := range c.Types {
		// A policy for a type no job can have is a mistake that would otherwise go
		// unnoticed: it never applies.
		if err := queue.ValidateType(typ); err != nil {
			return fmt.Errorf("worker: Config.Types: %w", err)
		}
		if p.Timeout < 0 || p.Timeout > 0 && p.Timeout < queue.MinTimeout {
			return fmt.Errorf("worker: Config.Types[%q]: timeout %s must be at least %s", typ, p.Timeout, queue.MinTimeout)
		}
		if p.MaxRetry < 0 || p.MaxRetry > queue.MaxRetryLimit {
			return fmt.Errorf("worker: Config.Types[%q]: max retry %d must be from 0 to %d", typ, p.MaxRetry, queue.MaxRetryLimit)
		}
	}
	for q, w := range c.Queues {
		if err := queue.ValidateQueue(q); err != nil {
			return fmt.Errorf("worker: Config.Queues: %w", err)
		}
		if w <= 0 || w > MaxWeight {
			return fmt.Errorf("worker: Config.Queues: weight %d of queue %q must be from 1 to %d", w, q, MaxWeight)
		}
	}
	return nil
}

// Worker claims jobs from its queues and runs them with its Handler.
type Worker struct {
	client *queue.Client
	broker broker.Broker // client's worker side
	locker *lock.Locker
	cfg    Config
	log    *slog.Logger
	queues []string // sorted, for deterministic logs and the wait call

	entry   queue.Process // its registry entry, but for the state (registry.go)
	metrics *metrics      // nil without Config.Registerer
	running atomic.Bool   // a Run is in progress
	// trace, set only by this package's benchmarks (BenchmarkPickup) before Run, is told
	// when a wait returns a token or a handed job and when a claim is sent and answered:
	// where a pickup's time goes. Called from the calls' goroutines; nil: nothing is measured.
	trace func(p tracePoint, at time.Time)
}

// tracePoint is a step on the way from a wake token to a claimed job (Worker.trace).
type tracePoint int

const (
	traceWoken   tracePoint = iota // a wait returned a wake token
	traceClaim                     // a claim (exchange with n > 0) is sent
	traceClaimed                   // its reply came back
	traceHanded                    // a wait returned a job handed to this worker
	traceDrained                   // a claim's reply carried a job handed to this worker (its hand list drained)
)

// ErrRunning is returned by Run when another Run of the same Worker is in progress.
var ErrRunning = errors.New("worker: Run called while another Run of this Worker is in progress")

// New returns a Worker; it does nothing until Run.
func New(client *queue.Client, cfg Config) (*Worker, error) {
	if client == nil {
		return nil, errors.New("worker: nil queue client")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := broker.Of(client)
	w := &Worker{client: client, broker: b, locker: lock.New(b.Redis()), cfg: cfg, entry: newEntry(cfg)}
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

// Run claims and runs jobs until ctx is cancelled, or an operator stops the worker
// (queue.Client.Stop, `jobs workers stop`). It then stops claiming, hands back the jobs
// it claimed ahead, lets running jobs finish within Config.ShutdownTimeout, cancels and
// hands back the rest so another worker takes them at once, and returns nil. While it
// runs, the worker is listed in the registry of live processes (see Config.Beat); it
// leaves the list when Run returns.
// A Worker runs one Run at a time: a second Run while one is in progress returns
// ErrRunning at once; a Run after the previous one returned starts afresh.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer w.running.Store(false)
	w.log.LogAttrs(ctx, slog.LevelInfo, "worker started",
		slog.Any("queues", w.cfg.Queues), slog.Int("concurrency", w.cfg.Concurrency),
		slog.Duration("lease", w.cfg.Lease))
	newLoop(w, ctx).run(ctx)
	w.deregister(ctx)
	w.metrics.setBusy(0)
	w.log.LogAttrs(ctx, slog.LevelInfo, "worker stopped")
	return nil
}

// failed calls the Config's hooks for a failed attempt recorded as state, with a copy
// of the job as it is now.
func (w *Worker) failed(job *queue.Job, state queue.State, reason string, err error) {
	if w.cfg.OnError == nil && (w.cfg.OnDead == nil || state != queue.StateDead) {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			w.log.With(jobAttrs(job)...).LogAttrs(context.Background(), slog.LevelError,
				"Config.OnError or OnDead panicked", slog.Any("panic", v))
		}
	}()
	j := *job
	j.State, j.LastError, j.Lease = state, reason, ""
	j.Payload, j.Result = slices.Clone(j.Payload), slices.Clone(j.Result)
	if w.cfg.OnError != nil {
		w.cfg.OnError(&j, err)
	}
	if w.cfg.OnDead != nil && state == queue.StateDead {
		dead := j
		w.cfg.OnDead(&dead, err)
	}
}
