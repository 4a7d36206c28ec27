package bench

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// processedByQueue returns each queue under prefix with the attempts that ended in it
// today (its stats counter, which the ack script writes).
func processedByQueue(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	client, err := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	names, err := client.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := client.StatsOf(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, st := range stats {
		out[st.Name] = st.ProcessedToday
	}
	return out
}

// TestQueuesSpread: with Queues 3, every mode puts the same share of its N jobs on each
// of three queues and its worker runs them all: each queue's processed count is N/3, plus
// the warm-up job on the first queue in the modes that have one.
func TestQueuesSpread(t *testing.T) {
	for _, tc := range []struct {
		mode string
		n    int
		warm bool
	}{
		{ModeEnqueue, 30, true},
		{ModeEnqueueBatch, 2400, true}, // batches of 1,000: a job's queue is its own, not its batch's
		{ModeProcess, 300, false},
		{ModeLatency, 9, true},
		{ModeDelay, 6, true},
		{ModeMemory, 30, true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			rdb, prefix := redistest.Client(t), redistest.Prefix(t)
			rec := runIn(t, rdb, prefix, Options{Mode: tc.mode, N: tc.n, Concurrency: 4, Queues: 3})
			if rec.Queues != 3 || rec.Backlog != 0 {
				t.Errorf("Run() queues = %d, backlog = %d, want 3 and 0", rec.Queues, rec.Backlog)
			}
			got := processedByQueue(t, rdb, prefix)
			names := slices.Sorted(maps.Keys(got))
			if len(names) != 3 {
				t.Fatalf("queues under the prefix = %v, want 3", names)
			}
			for i, q := range names {
				want := int64(tc.n / 3)
				if i == 0 && tc.warm {
					want++
				}
				if got[q] != want {
					t.Errorf("queue %s processed %d jobs, want %d (all: %v)", q, got[q], want, got)
				}
			}
		})
	}
}

// TestOneQueueRecordsNoQueues: the default, one queue, leaves queues out of the record,
// as it was before the option.
func TestOneQueueRecordsNoQueues(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	if rec := runIn(t, rdb, prefix, Options{Mode: ModeEnqueue, N: 10, Queues: 1}); rec.Queues != 0 {
		t.Errorf("Run() queues = %d, want 0 (omitted) for one queue", rec.Queues)
	}
	if got := processedByQueue(t, rdb, prefix); len(got) != 1 {
		t.Errorf("queues under the prefix = %v, want one", got)
	}
}

// TestBacklogIdle: a latency run's backlog is scheduled an hour ahead, so its worker stays
// idle and never runs it: each queue processed exactly its samples (and the warm-up), and
// the backlog is gone after the run (run checks no job is left).
func TestBacklogIdle(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	rec := runIn(t, rdb, prefix, Options{Mode: ModeLatency, N: 10, Queues: 2, Backlog: 2500})
	if rec.Backlog != 2500 || rec.Queues != 2 {
		t.Errorf("Run() backlog = %d, queues = %d, want 2500 and 2", rec.Backlog, rec.Queues)
	}
	var sum int64
	for _, n := range processedByQueue(t, rdb, prefix) {
		sum += n
	}
	if sum != 11 {
		t.Errorf("processed %d jobs, want 11 (10 samples and the warm-up, no backlog job)", sum)
	}
}

// TestBacklogBehindProcess: a process run's backlog is ready behind its N jobs: the run
// ends once the N are done, whatever of the backlog its worker reached by then is run
// uncounted, and the rest is purged.
func TestBacklogBehindProcess(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	const n, backlog = 300, 3000
	rec := runIn(t, rdb, prefix, Options{Mode: ModeProcess, N: n, Concurrency: 8, Queues: 2, Backlog: backlog})
	if rec.Backlog != backlog || rec.JobsPerS <= 0 {
		t.Errorf("Run() backlog = %d, jobs_per_s = %v, want %d and > 0", rec.Backlog, rec.JobsPerS, backlog)
	}
	var sum int64
	for _, c := range processedByQueue(t, rdb, prefix) {
		sum += c
	}
	if sum < n || sum > n+backlog {
		t.Errorf("processed %d jobs, want the %d measured and at most the %d of the backlog", sum, n, backlog)
	}
}
