package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// fanoutRounds is how many times fanout runs the plain drain and the batch, alternated,
// so a machine busy with something else weighs on both alike.
const fanoutRounds = 2

// fanoutSamples is how many dependency -> dependent latencies fanout takes, in one slot
// and across slots each.
const fanoutSamples = 200

// fan is the worker of a fanout run, on the run's queue and its second queue: its
// handler counts the jobs of JobType, notes when the batch's callback starts, and times
// dependency -> dependent pairs.
type fan struct {
	n        atomic.Int64
	target   int64
	all      chan struct{} // closed when target jobs of JobType started
	callback chan time.Time
	ends     sync.Map // dependency ID -> time its handler returned
	started  chan time.Duration
}

func (f *fan) process(ctx context.Context, j *queue.Job) error {
	start := time.Now()
	switch j.Type {
	case JobType:
		if f.n.Add(1) == f.target {
			close(f.all)
		}
	case fanCallback:
		f.callback <- start
	case fanDep:
		f.ends.Store(j.ID, time.Now())
	case fanDependent:
		if end, ok := f.ends.Load(j.After[0].ID); ok {
			f.started <- start.Sub(end.(time.Time))
		} else {
			f.started <- -1
		}
	}
	return nil
}

const (
	fanCallback  = "bench-callback"
	fanDep       = "bench-dep"
	fanDependent = "bench-dependent"
)

// fanout measures workflows (jobs bench --mode fanout): N plain jobs drained by a worker
// of concurrency C, against a batch of N children with a success callback (children per
// second: N / worker start to callback start), alternated fanoutRounds times; then
// fanoutSamples dependency -> dependent pairs one at a time on an idle worker, the
// dependent in the same queue (p50, p99, max: dependency's handler returned -> dependent's
// started) and in another queue, another slot on a cluster (P99CrossMs); then Redis
// bytes per pending dependency edge: N dependents waiting on N pending jobs, less N
// jobs scheduled alike without one.
func (b *bench) fanout(ctx context.Context) (Record, error) {
	n, c := b.o.N, b.o.Concurrency
	other := b.queue + "-x"
	var batches []queue.BatchRef
	defer func() { b.dropFanout(context.WithoutCancel(ctx), other, batches) }()
	var plain, batch time.Duration
	for round := 0; round < fanoutRounds; round++ {
		var done atomic.Int64
		b.prog.phase(fmt.Sprintf("plain %d", round+1), int64(n), done.Load)
		if _, err := b.enqueueBatches(ctx, n, c, &done, nil); err != nil {
			return Record{}, err
		}
		took, err := b.fanDrain(ctx, n, c, nil)
		if err != nil {
			return Record{}, err
		}
		plain += took
		jobs := make([]queue.BatchJob, n)
		for i := range jobs {
			jobs[i] = b.job()
		}
		b.prog.phase(fmt.Sprintf("batch %d", round+1), int64(n), done.Load)
		ref, _, err := b.client.NewBatch(ctx, queue.BatchOptions{Queue: b.queue,
			OnSuccess: &queue.Callback{Type: fanCallback}}, jobs)
		if err != nil {
			return Record{}, fmt.Errorf("bench: %w", err)
		}
		batches = append(batches, ref)
		b.enqueued.Add(int64(n))
		took, err = b.fanDrain(ctx, n, c, make(chan time.Time, 1))
		if err != nil {
			return Record{}, err
		}
		batch += took
	}
	rec := Record{JobsPerS: math.Round(float64(n*fanoutRounds) / batch.Seconds())}
	rec.PlainJobsPerS = math.Round(float64(n*fanoutRounds) / plain.Seconds())
	rec.Ratio = math.Round(rec.JobsPerS/rec.PlainJobsPerS*100) / 100

	same, err := b.fanLatency(ctx, b.queue)
	if err != nil {
		return Record{}, err
	}
	cross, err := b.fanLatency(ctx, other)
	if err != nil {
		return Record{}, err
	}
	s := summary(len(same), time.Second, same)
	rec.P50Ms, rec.P99Ms, rec.MaxMs = s.P50Ms, s.P99Ms, s.MaxMs
	rec.P99CrossMs = summary(len(cross), time.Second, cross).P99Ms
	rec.BytesPerEdge, err = b.edgeBytes(ctx, n, other)
	return rec, err
}

// fanDrain runs a worker on the run's queues until n jobs of JobType started and, with
// callback set, the batch's callback started too (else until the last C jobs are
// acknowledged), and returns the time from its start.
func (b *bench) fanDrain(ctx context.Context, n, c int, callback chan time.Time) (time.Duration, error) {
	f := &fan{target: int64(n), all: make(chan struct{}), callback: callback}
	stop, err := b.fanWorker(ctx, c, f, b.queue)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	var end time.Time
	select {
	case <-f.all:
	case <-ctx.Done():
	case <-time.After(10 * stallTimeout):
		err = fmt.Errorf("bench: %d of %d jobs started", f.n.Load(), n)
	}
	if err == nil && callback != nil {
		select {
		case end = <-callback:
		case <-ctx.Done():
		case <-time.After(stallTimeout):
			err = errors.New("bench: the batch's callback did not start")
		}
	}
	if end.IsZero() {
		end = time.Now()
	}
	b.handled.Add(f.n.Load())
	return end.Sub(start), errors.Join(err, ctx.Err(), stop())
}

// fanLatency times fanoutSamples dependency -> dependent pairs, the dependency on the
// run's queue and the dependent on q, one at a time on an idle worker.
func (b *bench) fanLatency(ctx context.Context, q string) ([]time.Duration, error) {
	f := &fan{started: make(chan time.Duration, 1)}
	stop, err := b.fanWorker(ctx, b.o.Concurrency, f, b.queue, q)
	if err != nil {
		return nil, err
	}
	took := make([]time.Duration, 0, fanoutSamples)
	for i := 0; i < fanoutSamples && err == nil; i++ {
		// One call: the dependency is written with its dependent registered, so it may
		// end at once (this run keeps no done jobs) without the dependent missing it.
		dep := fmt.Sprintf("dep-%d-%s", i, q)
		_, err = b.client.EnqueueBatch(ctx, []queue.BatchJob{
			{Type: fanDep, Options: []queue.Option{queue.On(b.queue), queue.ID(dep)}},
			{Type: fanDependent, Options: []queue.Option{queue.On(q), queue.AfterJob(b.queue, dep)}}})
		if err != nil {
			break
		}
		select {
		case d := <-f.started:
			if d < 0 {
				err = errors.New("bench: a dependent started before its dependency ended")
			}
			took = append(took, d)
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(stallTimeout):
			err = errors.New("bench: a dependent did not start")
		}
	}
	return took, errors.Join(err, stop())
}

// fanWorker starts a worker of concurrency c on queues with f's handler; stop ends it.
func (b *bench) fanWorker(ctx context.Context, c int, f *fan, queues ...string) (stop func() error, err error) {
	weights := map[string]int{}
	for _, q := range queues {
		weights[q] = 1
	}
	w, err := worker.New(b.client, worker.Config{Handler: worker.HandlerFunc(f.process), Queues: weights,
		Concurrency: c, Logger: slog.New(errorsOnly{slog.Default().Handler()})})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	result := make(chan error, 1)
	go func() { result <- w.Run(ctx) }()
	return func() error { cancel(); return <-result }, nil
}

// edgeBytes is Redis's memory per pending dependency edge: n dependents (on queue other)
// each waiting on its own pending job (scheduled an hour ahead, on the run's queue), less
// n jobs scheduled alike without dependencies; all deleted after.
func (b *bench) edgeBytes(ctx context.Context, n int, other string) (float64, error) {
	rdb := broker.Of(b.client).Redis()
	m0, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, err
	}
	var done atomic.Int64
	b.prog.phase("memory", int64(2*n), done.Load)
	plain := func() queue.BatchJob { return b.job(queue.Delay(time.Hour)) }
	if _, err := b.enqueueBatches(ctx, n, 1, &done, plain); err != nil {
		return 0, err
	}
	b.enqueued.Add(-int64(n)) // deleted by dropFanout, not run: cleanup must not wait for them
	m1, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, err
	}
	deps := make([]queue.BatchJob, 0, BatchSize)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("edge-%d", i)
		deps = append(deps, b.job(queue.Delay(time.Hour), queue.ID(id)), queue.BatchJob{Type: JobType,
			Payload: b.payload, Options: []queue.Option{queue.On(other), queue.AfterJob(b.queue, id), queue.ID("dependent-" + id)}})
		if len(deps) >= BatchSize || i == n-1 {
			if _, err := b.client.EnqueueBatch(ctx, deps); err != nil {
				return 0, fmt.Errorf("bench: %w", err)
			}
			done.Add(int64(len(deps) / 2))
			deps = deps[:0]
		}
	}
	m2, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, err
	}
	// m2-m1: n dependents and n dependencies; m1-m0: n plain jobs, as the dependencies.
	perEdge := float64((m2-m1)-2*(m1-m0)) / float64(n)
	return math.Round(perEdge*10) / 10, nil
}

// dropFanout deletes what a fanout run leaves: the jobs of the memory phase (waiting on
// other, scheduled on the run's queue), the outbox entries their purge writes (for
// dependents already gone), and the ended batches.
func (b *bench) dropFanout(ctx context.Context, other string, batches []queue.BatchRef) {
	_, _ = b.client.Purge(ctx, other, queue.StateWaiting)
	_, _ = b.client.Purge(ctx, b.queue, queue.StateScheduled)
	rdb := broker.Of(b.client).Redis()
	prefix := b.client.Config().Prefix + ":{" + b.queue + "}:"
	rdb.Del(ctx, prefix+"outbox")
	for _, ref := range batches {
		rdb.Del(ctx, prefix+"batch:"+ref.ID)
	}
}
