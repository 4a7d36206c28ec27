package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// process pre-enqueues N jobs (untimed), then times a worker of concurrency C with a
// no-op handler from its start until every job ran and was acknowledged:
// jobs_per_s = N / that time.
//
// The percentiles are of each job's handler start minus the worker's start: when in the
// drain a job began (p50 about half the drain, max about all of it). They use one clock,
// the benchmark's; the alternative, handler start minus Job.CreatedAt, would mix in
// Redis's clock (milliseconds only, maybe on another host) and the untimed pre-enqueue.
//
// Completion is "N handler calls, and the last C jobs to start acknowledged" (their
// hashes gone, as done jobs are deleted at once): no-op handlers return in about the order
// they start, and the worker sends acks in the order handlers return (each call's in job
// ID order), so these are the acknowledgements still outstanding. The worker's
// graceful stop, which waits for every acknowledgement, is not timed: an idle worker may
// take up to queue.MaxWait to notice it should stop.
//
// With Options.Backlog, that many jobs are enqueued (untimed) behind the N, in the same
// queues: the worker takes them once the N have started and goes on with them until it
// is stopped, uncounted; the rest are purged by Run.
func (b *bench) process(ctx context.Context) (Record, error) {
	n, c := b.o.N, b.o.Concurrency
	var done atomic.Int64
	b.prog.phase("enqueue", int64(n), done.Load)
	if _, err := b.enqueueBatches(ctx, n, c, &done, nil); err != nil {
		return Record{}, err
	}
	if b.o.Backlog > 0 { // behind the N: ready, but reached only once they have started
		if err := b.fillBacklog(ctx); err != nil {
			return Record{}, err
		}
	}

	took := make([]time.Duration, n)
	refs := make([]jobRef, n)
	start := time.Now()
	r, err := b.startWorker(ctx, c, n, refs, func(i int, _ *queue.Job, at time.Time) {
		if i < n {
			took[i] = at.Sub(start)
		}
	})
	if err != nil {
		return Record{}, err
	}
	b.prog.phase("process", int64(n), r.count)
	err = r.wait(ctx)
	if err == nil {
		err = b.awaitAcks(ctx, refs[n-min(c, n):])
	}
	elapsed := time.Since(start)
	if err = errors.Join(err, r.stop()); err != nil {
		return Record{}, err
	}
	return summary(n, elapsed, took), nil
}

// awaitAcks waits until each job of refs is acknowledged: deleted (done jobs are not
// retained in a run) or done.
func (b *bench) awaitAcks(ctx context.Context, refs []jobRef) error {
	deadline := time.Now().Add(stallTimeout)
	return parallel(ctx, 16, len(refs), func(ctx context.Context, i int) error {
		for {
			j, err := b.client.Get(ctx, refs[i].queue, refs[i].id)
			switch {
			case errors.Is(err, queue.ErrNotFound), err == nil && j.State == queue.StateDone:
				return nil
			case err != nil:
				return fmt.Errorf("bench: %w", err)
			case time.Now().After(deadline):
				return fmt.Errorf("bench: job %s still %s after %s", refs[i].id, j.State, stallTimeout)
			}
		}
	})
}
