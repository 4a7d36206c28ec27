package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// backlogType is the type of Options.Backlog's jobs: the run's handler returns at once
// for them without counting them, so that a process run's worker, reaching them after
// the N measured, neither counts them as the run's nor waits for them.
const backlogType = "bench-backlog"

// backlogAhead is how far ahead the backlog is scheduled outside process mode: far past
// any run, so no worker of the run is woken for it.
const backlogAhead = time.Hour

// queueNames returns the run's n queue names: base alone for one queue, else base-0 ..
// base-(n-1).
func queueNames(base string, n int) []string {
	if n <= 1 {
		return []string{base}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = base + "-" + strconv.Itoa(i)
	}
	return names
}

// nextQueue returns the queue for the next job: the run's queues in turn.
func (b *bench) nextQueue() string {
	return b.queues[int((b.spread.Add(1)-1)%int64(len(b.queues)))]
}

// where names the run's queues, for errors.
func (b *bench) where() string {
	if len(b.queues) == 1 {
		return "queue " + b.queue
	}
	return fmt.Sprintf("queues %s..%s", b.queues[0], b.queues[len(b.queues)-1])
}

// fillBacklog enqueues Options.Backlog jobs of backlogType over the run's queues, in
// batches of BatchSize: ready in process mode, scheduled backlogAhead otherwise. They
// are not the run's jobs: cleanup does not wait for them, purgeBacklog deletes them.
func (b *bench) fillBacklog(ctx context.Context) error {
	var opts []queue.Option
	if b.o.Mode != ModeProcess {
		opts = append(opts, queue.Delay(backlogAhead))
	}
	var done atomic.Int64
	b.prog.phase("backlog", int64(b.o.Backlog), done.Load)
	_, err := b.enqueueBatches(ctx, b.o.Backlog, b.o.Concurrency, &done, func() queue.BatchJob {
		return queue.BatchJob{Type: backlogType, Payload: b.payload,
			Options: append([]queue.Option{queue.On(b.nextQueue())}, opts...)}
	})
	b.enqueued.Add(-done.Load()) // enqueueBatches counted them as the run's
	if err != nil {
		return fmt.Errorf("%w (backlog)", err)
	}
	return nil
}

// purgeBacklog deletes what is left of the backlog (process mode's worker ran some of it)
// once the run's own jobs are done: ready or scheduled, wherever fillBacklog put it. Like
// cleanup, it does nothing once ctx is done.
func (b *bench) purgeBacklog(ctx context.Context) error {
	if b.o.Backlog <= 0 || ctx.Err() != nil {
		return nil
	}
	state := queue.StateScheduled
	if b.o.Mode == ModeProcess {
		state = queue.StateReady
	}
	var done atomic.Int64
	b.prog.phase("purge", int64(len(b.queues)), done.Load)
	for _, q := range b.queues {
		if _, err := b.client.Purge(ctx, q, state); err != nil {
			return err
		}
		done.Add(1)
	}
	return nil
}
