package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// enqueue times N single Enqueue calls from C goroutines: jobs_per_s = N / elapsed, and
// the percentiles are of each call's duration.
func (b *bench) enqueue(ctx context.Context) (Record, error) {
	if err := b.warmUp(ctx); err != nil {
		return Record{}, err
	}
	n := b.o.N
	took := make([]time.Duration, n)
	var done atomic.Int64
	b.prog.phase("enqueue", int64(n), done.Load)
	start := time.Now()
	err := parallel(ctx, b.o.Concurrency, n, func(ctx context.Context, i int) error {
		t0 := time.Now()
		_, err := b.client.Enqueue(ctx, JobType, b.payload, queue.On(b.nextQueue()))
		took[i] = time.Since(t0)
		if err != nil {
			return fmt.Errorf("bench: enqueue: %w", err)
		}
		b.enqueued.Add(1)
		done.Add(1)
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return Record{}, err
	}
	return summary(n, elapsed, took), nil
}

// enqueueBatch times N jobs enqueued by EnqueueBatch calls of BatchSize jobs from C
// goroutines: jobs_per_s = N / elapsed, and the percentiles are of each call's duration.
func (b *bench) enqueueBatch(ctx context.Context) (Record, error) {
	if err := b.warmUp(ctx); err != nil {
		return Record{}, err
	}
	var done atomic.Int64
	b.prog.phase("enqueue", int64(b.o.N), done.Load)
	start := time.Now()
	took, err := b.enqueueBatches(ctx, b.o.N, b.o.Concurrency, &done, nil)
	elapsed := time.Since(start)
	if err != nil {
		return Record{}, err
	}
	return summary(b.o.N, elapsed, took), nil
}
