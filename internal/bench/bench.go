// Package bench is the engine behind `jobs bench`: it measures enqueue throughput, worker
// throughput, pickup latency, delayed-job punctuality and memory per job, and reports each
// run as one [Record], the JSON line of DESIGN.md's benchmark contract.
//
// It drives the system only through the public APIs a user has (queue.Client's Enqueue
// and EnqueueBatch, worker.Worker with a Handler), so what it measures is what an
// application gets.
//
// Each Run works on a queue of its own ("bench-" and 5 random characters, or
// Options.Queues of them, that name and "-<i>") under the given prefix, so runs never see
// each other's jobs. The name is as short as the peers' ("bench" in BullMQ's harness,
// "default" in asynq's): it is in every job's key, so a longer one would add its length to
// the bytes per job. It leaves no job behind: jobs it enqueued but did not process are
// drained by a worker before Run returns, its backlog is purged, and its workers delete
// done jobs at once (queue.Config.DoneRetention < 0). What stays is each queue's name in
// the prefix's set of queues, at most a few wake tokens and each queue's event stream
// (capped at about queue.Config.Events entries): run it under a prefix of its own (or
// flush that Redis) to leave nothing at all. A run interrupted by its context does not
// drain.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/queue"
	"github.com/redis/go-redis/v9"
)

// The modes of [Options.Mode].
const (
	ModeEnqueue      = "enqueue"       // N single Enqueue calls from C goroutines
	ModeEnqueueBatch = "enqueue-batch" // N jobs by EnqueueBatch of BatchSize, from C goroutines
	ModeProcess      = "process"       // N pre-enqueued jobs drained by a worker of concurrency C
	ModeLatency      = "latency"       // one job at a time to an idle worker: Enqueue call to handler start
	ModeDelay        = "delay"         // jobs due 1-3 s ahead: handler start minus due time
	ModeMemory       = "memory"        // Redis used_memory growth per pending job
	ModeFanout       = "fanout"        // a batch of N children and a callback vs N plain jobs; dependency -> dependent latency; bytes per edge
)

// Modes returns every mode, in the order `jobs bench --help` should list them.
func Modes() []string {
	return []string{ModeEnqueue, ModeEnqueueBatch, ModeProcess, ModeLatency, ModeDelay, ModeMemory, ModeFanout}
}

// Defaults and fixed sizes.
const (
	// DefaultConcurrency is used when Options.Concurrency is 0 (the worker's default too).
	DefaultConcurrency = 10
	// BatchSize is how many jobs one EnqueueBatch call carries, in every mode that
	// enqueues in batches.
	BatchSize = 1000
	// JobType is the type of every job a run enqueues and measures.
	JobType = "bench"
	// MaxQueues is the most queues Options.Queues may spread a run over: each is a
	// name left in the prefix's set of queues (see the package doc), and one worker
	// serves them all.
	MaxQueues = 10_000
)

// Options say what to measure.
type Options struct {
	// Mode is one of Modes().
	Mode string
	// N is how many jobs (latency: how many samples). Must be positive.
	N int
	// Concurrency is how many goroutines enqueue (enqueue modes) or how many jobs the
	// worker runs at once (process, latency, delay). Default: 10.
	Concurrency int
	// Payload is each job's payload size in bytes. Default: 0, an empty payload.
	Payload int
	// Progress, when not nil, receives a single line that is rewritten ("\r...") at most
	// five times a second while the run goes on, and ended with "\n" when Run returns.
	// Give it a terminal's stderr, not a file.
	Progress io.Writer
	// Events is the run's queue.Config.Events: 0 the default (events on), negative off,
	// so the cost of the event stream can be measured.
	Events int
	// NoHistory turns the worker's metrics history off (worker.Config.HistoryInterval
	// negative), so its cost can be measured.
	NoHistory bool
	// Limit, when not zero, is set on the run's queue before it starts (queue.SetLimit),
	// so the cost of limits, or a binding rate's accuracy, can be measured. It is removed
	// before the cleanup.
	Limit queue.Limit
	// LimitKeys, when positive, spreads the run's jobs over that many limit keys
	// (queue.LimitKey, round-robin), so the cost of per-key limits (Limit's Key fields)
	// can be measured.
	LimitKeys int
	// Queues spreads the run's jobs over that many queues of its own, round-robin (each
	// Enqueue call, each job of a batch), all served by the run's worker with weight 1,
	// so the cost of many queues, or a Redis Cluster's spread of them over its nodes, can
	// be measured. Limit, when set, is set on each. Not in fanout mode, which runs on two
	// queues of its own. Default: 1; at most MaxQueues.
	Queues int
	// Backlog, when positive, is how many more jobs wait in the run's queues while it
	// measures (untimed, never counted), so how the cost of a job grows with the jobs
	// pending can be measured. In process mode they are ready jobs enqueued behind the N
	// measured: a queue hands out its oldest job first, so the worker reaches them only
	// once the N have started. In the other modes they are scheduled an hour ahead, so
	// that a latency run's worker stays idle. They are spread over the queues as the
	// run's jobs are, and purged before Run returns. Not in fanout mode.
	Backlog int
}

// Record is the result of one run: one JSON line of the benchmark contract (DESIGN.md).
// Durations are in milliseconds.
type Record struct {
	System   string  `json:"system"` // always "jobs"
	Mode     string  `json:"mode"`
	N        int     `json:"n"`
	C        int     `json:"c"`
	JobsPerS float64 `json:"jobs_per_s"` // 0 in latency and delay modes, which measure time, not throughput
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	// BytesPerJob is set in memory mode only.
	BytesPerJob float64 `json:"bytes_per_job,omitempty"`
	// Fanout mode only: JobsPerS is the batch's children per second, PlainJobsPerS the
	// same number of plain jobs' and Ratio the one over the other; P50Ms, P99Ms and MaxMs
	// are dependency done -> dependent started in one queue, P99CrossMs across queues
	// (slots); BytesPerEdge is Redis's memory per pending dependency edge.
	PlainJobsPerS float64 `json:"plain_jobs_per_s,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
	P99CrossMs    float64 `json:"p99_cross_ms,omitempty"`
	BytesPerEdge  float64 `json:"bytes_per_edge,omitempty"`
	// Queues and Backlog repeat Options.Queues (when above 1) and Options.Backlog, so a
	// line says what it measured.
	Queues  int `json:"queues,omitempty"`
	Backlog int `json:"backlog,omitempty"`
}

// Run runs one benchmark on rdb, with keys under prefix (queue.Config.Prefix; empty
// means queue.DefaultPrefix), and returns its Record. Bad options fail with ErrInvalid
// before Redis is touched. See the package doc for what a run leaves in Redis.
func Run(ctx context.Context, rdb redis.UniversalClient, prefix string, o Options) (Record, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Record{}, err
	}
	if rdb == nil {
		return Record{}, fmt.Errorf("%w: nil Redis client", ErrInvalid)
	}
	client, err := queue.NewClient(rdb, queue.Config{Prefix: prefix, DoneRetention: -1, Events: o.Events})
	if err != nil {
		return Record{}, fmt.Errorf("bench: %w", err)
	}
	b := &bench{
		o:       o,
		client:  client,
		queues:  queueNames("bench-"+strconv.FormatUint(rand.Uint64N(36*36*36*36*36), 36), o.Queues),
		payload: make([]byte, o.Payload),
		prog:    newProgress(o.Progress, o.Mode),
	}
	b.queue = b.queues[0]
	for i := range b.payload {
		b.payload[i] = 'x'
	}
	defer b.prog.close()

	limited := o.Limit != (queue.Limit{})
	if limited {
		for _, q := range b.queues {
			if err := client.SetLimit(ctx, q, o.Limit); err != nil {
				return Record{}, fmt.Errorf("bench: %w", err)
			}
		}
	}
	var rec Record
	if o.Backlog > 0 && o.Mode != ModeProcess { // process enqueues it behind its own jobs
		err = b.fillBacklog(ctx)
	}
	if err == nil {
		rec, err = b.measure(ctx)
	}
	if limited {
		for _, q := range b.queues {
			if lerr := client.RemoveLimit(context.WithoutCancel(ctx), q); lerr != nil {
				err = errors.Join(err, fmt.Errorf("bench: %w", lerr))
			}
		}
	}
	if cerr := b.cleanup(ctx); cerr != nil {
		err = errors.Join(err, fmt.Errorf("bench: cleanup of %s: %w", b.where(), cerr))
	}
	if perr := b.purgeBacklog(ctx); perr != nil {
		err = errors.Join(err, fmt.Errorf("bench: purge of the backlog: %w", perr))
	}
	if err != nil {
		return Record{}, err
	}
	rec.System, rec.Mode, rec.N, rec.C = "jobs", o.Mode, o.N, o.Concurrency
	rec.Backlog = o.Backlog
	if o.Queues > 1 {
		rec.Queues = o.Queues
	}
	return rec, nil
}

// measure runs the mode's measurement.
func (b *bench) measure(ctx context.Context) (Record, error) {
	switch b.o.Mode {
	case ModeEnqueue:
		return b.enqueue(ctx)
	case ModeEnqueueBatch:
		return b.enqueueBatch(ctx)
	case ModeProcess:
		return b.process(ctx)
	case ModeLatency:
		return b.latency(ctx)
	case ModeDelay:
		return b.delay(ctx)
	case ModeMemory:
		return b.memory(ctx)
	default:
		return b.fanout(ctx)
	}
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case !slices.Contains(Modes(), o.Mode):
		return o, fmt.Errorf("%w: unknown mode %q (want one of %s)", ErrInvalid, o.Mode,
			strings.Join(Modes(), ", "))
	case o.N <= 0:
		return o, fmt.Errorf("%w: N must be positive, got %d", ErrInvalid, o.N)
	case o.Concurrency < 0:
		return o, fmt.Errorf("%w: concurrency %d is negative", ErrInvalid, o.Concurrency)
	case o.Payload < 0:
		return o, fmt.Errorf("%w: payload %d bytes is negative", ErrInvalid, o.Payload)
	case o.Payload > queue.DefaultMaxPayload:
		return o, fmt.Errorf("%w: payload %d bytes is over the %d-byte limit of a job",
			ErrInvalid, o.Payload, queue.DefaultMaxPayload)
	case o.Queues < 0 || o.Queues > MaxQueues:
		return o, fmt.Errorf("%w: queues must be from 1 to %d, got %d", ErrInvalid, MaxQueues, o.Queues)
	case o.Backlog < 0:
		return o, fmt.Errorf("%w: backlog %d is negative", ErrInvalid, o.Backlog)
	case o.Mode == ModeFanout && (o.Queues > 1 || o.Backlog > 0):
		return o, fmt.Errorf("%w: fanout runs on two queues of its own, with no backlog: "+
			"queues and backlog are for the other modes", ErrInvalid)
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Queues == 0 {
		o.Queues = 1
	}
	return o, nil
}

// bench is one Run.
type bench struct {
	o       Options
	client  *queue.Client
	queues  []string // fresh per run, Options.Queues of them
	queue   string   // queues[0]: the warm-up job's, and fanout's
	payload []byte
	prog    *progress

	// enqueued counts the jobs written to the queue and handled the handler calls of
	// every worker of the run: cleanup drains the difference.
	enqueued atomic.Int64
	handled  atomic.Int64
	keyed    atomic.Int64 // jobs built so far, for their limit keys
	spread   atomic.Int64 // jobs given a queue so far, for the next one's (nextQueue)
}

// stallTimeout is how long a wait may see no job start before it gives up: the worker
// or Redis is stuck, and a benchmark should say so rather than hang.
const stallTimeout = 30 * time.Second

// job returns one job of the run, due now unless opts say otherwise.
func (b *bench) job(opts ...queue.Option) queue.BatchJob {
	if b.o.LimitKeys > 0 {
		opts = append(opts, queue.LimitKey("k"+strconv.FormatInt(b.keyed.Add(1)%int64(b.o.LimitKeys), 10)))
	}
	return queue.BatchJob{Type: JobType, Payload: b.payload,
		Options: append([]queue.Option{queue.On(b.nextQueue())}, opts...)}
}

// enqueueBatches enqueues n jobs in batches of BatchSize from up to workers goroutines,
// each job built by build (nil: b.job()). It returns the duration of each batch call,
// and counts jobs as they are written (b.enqueued, and done for progress).
func (b *bench) enqueueBatches(ctx context.Context, n, workers int, done *atomic.Int64,
	build func() queue.BatchJob) ([]time.Duration, error) {
	if build == nil {
		build = func() queue.BatchJob { return b.job() }
	}
	batches := (n + BatchSize - 1) / BatchSize
	took := make([]time.Duration, batches)
	err := parallel(ctx, workers, batches, func(ctx context.Context, k int) error {
		size := min(BatchSize, n-k*BatchSize)
		jobs := make([]queue.BatchJob, size)
		for i := range jobs {
			jobs[i] = build()
		}
		start := time.Now()
		_, err := b.client.EnqueueBatch(ctx, jobs)
		took[k] = time.Since(start)
		if err != nil {
			return fmt.Errorf("bench: enqueue batch: %w", err)
		}
		b.enqueued.Add(int64(size))
		done.Add(int64(size))
		return nil
	})
	return took, err
}

// warmUp enqueues one job (of type warmUpType) so the scripts are loaded in Redis and the
// queue is registered before anything is timed. A worker of the run handles it.
func (b *bench) warmUp(ctx context.Context) error {
	if _, err := b.client.Enqueue(ctx, warmUpType, nil, queue.On(b.queue)); err != nil {
		return fmt.Errorf("bench: warm-up enqueue: %w", err)
	}
	b.enqueued.Add(1)
	return nil
}

const warmUpType = "bench-warmup"

// cleanup drains the jobs the run enqueued but did not process, with a worker, so a run
// leaves no job behind. It does nothing once ctx is done.
func (b *bench) cleanup(ctx context.Context) error {
	base := b.handled.Load()
	left := b.enqueued.Load() - base
	if left <= 0 || ctx.Err() != nil {
		return nil
	}
	b.prog.phase("cleanup", left, func() int64 { return b.handled.Load() - base })
	r, err := b.startWorker(ctx, max(b.o.Concurrency, 100), 0, nil, nil)
	if err != nil {
		return err
	}
	err = waitUntil(ctx, func() bool { return b.handled.Load() >= b.enqueued.Load() },
		b.handled.Load)
	return errors.Join(err, r.stop())
}

// waitUntil polls cond every few milliseconds (for untimed waits only) until it holds,
// ctx ends, or progress (a counter) has not moved for stallTimeout.
func waitUntil(ctx context.Context, cond func() bool, progress func() int64) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	last, lastMove := progress(), time.Now()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if p := progress(); p != last {
			last, lastMove = p, time.Now()
		} else if time.Since(lastMove) > stallTimeout {
			return fmt.Errorf("bench: no job ran for %s", stallTimeout)
		}
	}
	return nil
}

// parallel runs fn for tasks 0..tasks-1 on up to workers goroutines; the first error
// stops the others and is returned.
func parallel(ctx context.Context, workers, tasks int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range max(min(workers, tasks), 1) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= tasks {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err })
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
