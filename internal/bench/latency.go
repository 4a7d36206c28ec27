package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// latencyIdle is the pause between two latency samples: long enough for the worker to
// acknowledge the last job and block in its wait again, which is the state measured.
const latencyIdle = 20 * time.Millisecond

// latency measures pickup latency at idle: one job at a time to an idle worker of
// concurrency C; each sample is the handler's start minus the start of the Enqueue call,
// both on the benchmark's clock. There is no throughput (jobs_per_s = 0).
func (b *bench) latency(ctx context.Context) (Record, error) {
	type startEvent struct {
		id string
		at time.Time
	}
	// A job runs twice only if its lease was lost; the buffer absorbs such repeats.
	starts := make(chan startEvent, 64)
	r, err := b.startWorker(ctx, b.o.Concurrency, 0, nil, func(_ int, job *queue.Job, at time.Time) {
		select {
		case starts <- startEvent{job.ID, at}:
		default:
		}
	})
	if err != nil {
		return Record{}, err
	}
	defer r.stop()
	if err := b.warmUp(ctx); err != nil {
		return Record{}, err
	}
	if err := r.waitWarm(ctx); err != nil {
		return Record{}, err
	}

	n := b.o.N
	took := make([]time.Duration, 0, n)
	var done atomic.Int64
	b.prog.phase("latency", int64(n), done.Load)
	idle := time.NewTimer(latencyIdle)
	defer idle.Stop()
	stall := time.NewTimer(stallTimeout)
	defer stall.Stop()
	for range n {
		idle.Reset(latencyIdle)
		select {
		case <-idle.C:
		case <-ctx.Done():
			return Record{}, ctx.Err()
		}
		t0 := time.Now()
		id, err := b.client.Enqueue(ctx, JobType, b.payload, queue.On(b.nextQueue()))
		if err != nil {
			return Record{}, fmt.Errorf("bench: enqueue: %w", err)
		}
		b.enqueued.Add(1)
		stall.Reset(stallTimeout)
	wait:
		for {
			select {
			case ev := <-starts:
				if ev.id == id {
					took = append(took, ev.at.Sub(t0))
					break wait
				}
			case <-ctx.Done():
				return Record{}, ctx.Err()
			case <-stall.C:
				return Record{}, fmt.Errorf("bench: job %s did not start within %s", id, stallTimeout)
			}
		}
		done.Add(1)
	}
	if err := r.stop(); err != nil {
		return Record{}, err
	}
	return summary(n, 0, took), nil
}

// delay measures how punctually delayed jobs start: N jobs enqueued (in batches, from C
// goroutines) each due uniformly 1-3 s ahead, run by a worker of concurrency C already
// waiting. Each sample is the handler's start minus the job's due time (Job.RunAt, which
// Redis holds to the millisecond); negative when a job started early, which can only come
// from the benchmark's and Redis's clocks disagreeing, as Redis decides when a job is due.
// There is no throughput (jobs_per_s = 0).
func (b *bench) delay(ctx context.Context) (Record, error) {
	n := b.o.N
	late := make([]time.Duration, n)
	var undated atomic.Int64
	r, err := b.startWorker(ctx, b.o.Concurrency, n, nil, func(i int, job *queue.Job, at time.Time) {
		if job.RunAt.IsZero() {
			undated.Add(1)
		} else if i < n {
			late[i] = at.Sub(job.RunAt)
		}
	})
	if err != nil {
		return Record{}, err
	}
	defer r.stop()
	if err := b.warmUp(ctx); err != nil {
		return Record{}, err
	}
	if err := r.waitWarm(ctx); err != nil {
		return Record{}, err
	}

	var enqueued atomic.Int64
	b.prog.phase("delay", int64(n), r.count)
	_, err = b.enqueueBatches(ctx, n, b.o.Concurrency, &enqueued, func() queue.BatchJob {
		return b.job(queue.At(time.Now().Add(time.Second + rand.N(2*time.Second))))
	})
	if err != nil {
		return Record{}, err
	}
	if err = errors.Join(r.wait(ctx), r.stop()); err != nil {
		return Record{}, err
	}
	if u := undated.Load(); u > 0 {
		return Record{}, fmt.Errorf("bench: %d delayed jobs came back with no due time", u)
	}
	return summary(n, 0, late), nil
}
