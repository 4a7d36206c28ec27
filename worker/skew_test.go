package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// skewed is a worker's broker as seen by a worker whose clock is off by -skew from
// Redis's: every Redis time it is told (a job's times, a claim's Redis time) is skew
// ahead of its own clock. The scripts read only Redis TIME, so the skew can only matter
// where the worker compares a Redis time with its own clock.
type skewed struct {
	broker.Broker
	skew time.Duration
}

func (s skewed) AckClaimWaiting(ctx context.Context, q string, finished []*queue.Job, results [][]byte, n int,
	lease time.Duration, worker string, w *proto.Waiter) ([]error, []*queue.Job, proto.Limited, bool, error) {
	acked, jobs, lim, registered, err := s.Broker.AckClaimWaiting(ctx, q, finished, results, n, lease, worker, w)
	for _, j := range jobs {
		s.shift(j)
	}
	if !lim.Now.IsZero() {
		lim.Now = lim.Now.Add(s.skew)
	}
	return acked, jobs, lim, registered, err
}

func (s skewed) WaitHanded(ctx context.Context, queues []string, timeout time.Duration, w *proto.Waiter) (
	string, string, *queue.Job, error) {
	q, token, job, err := s.Broker.WaitHanded(ctx, queues, timeout, w)
	if job != nil {
		s.shift(job)
	}
	return q, token, job, err
}

func (s skewed) shift(j *queue.Job) {
	j.StartedAt, j.CreatedAt = j.StartedAt.Add(s.skew), j.CreatedAt.Add(s.skew)
}

// startSkewedWorker is startWorker for a worker whose clock is skew behind Redis's, its
// claims timed by rec (on its monotonic clock, which no skew moves).
func startSkewedWorker(t *testing.T, c *queue.Client, cfg Config, skew time.Duration, rec *claimLateness) {
	t.Helper()
	w, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec.timeClaims(w) // under the skew: it records the starts by Redis's clock
	w.broker = skewed{w.broker, skew}
	runWorker(t, w)
}

// Worker clocks skewed by -10, 0 and +10 minutes from Redis's change nothing: a binding
// rate of 20/s across the three is kept (at most 20 starts, by Redis's clock, in any 1s
// window) and delivered (the mean within 2%, the time lost to claims the loaded machine
// sent late left out: rateKept), and a key's concurrency holds.
// The workers' waits are durations Redis gives them (until the next token or slot, until
// a job's reserved start: a gap between two Redis times), timed on their own monotonic
// clocks from the reply; no wall clock of theirs is compared with Redis's.
func TestWorkerClockSkewChangesNothing(t *testing.T) {
	c := newClient(t)
	if err := c.SetLimit(ctx, "default", queue.Limit{Rate: 20, Period: time.Second, KeyConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	batch := make([]queue.BatchJob, 100)
	for i := range batch {
		// Ten keys: each runs one job at a time (30ms, then its ack and the next claim), so
		// together they can start far more than 20 a second even on a loaded machine, and
		// the rate is what binds. With four, a loaded run fell to 17.5/s.
		batch[i] = queue.BatchJob{Type: "t", Options: []queue.Option{queue.LimitKey(fmt.Sprintf("k%d", i%10))}}
	}
	if _, err := c.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var starts []time.Time
	running := map[string]int{}
	most := 0
	skews := []time.Duration{-10 * time.Minute, 0, 10 * time.Minute}
	var rec claimLateness
	for _, skew := range skews {
		h := HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			mu.Lock()
			starts = append(starts, j.StartedAt.Add(-skew)) // back to Redis's clock
			running[j.LimitKey]++
			most = max(most, running[j.LimitKey])
			mu.Unlock()
			time.Sleep(30 * time.Millisecond)
			mu.Lock()
			running[j.LimitKey]--
			mu.Unlock()
			return nil
		})
		startSkewedWorker(t, c, Config{Handler: h, Concurrency: 4, Logger: quiet}, skew, &rec)
	}
	time.Sleep(3 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	rec.rateKept(t, "workers skewed -10m, 0, +10m, rate 20/s", starts, 20, time.Second)
	if most > 1 {
		t.Errorf("%d jobs of one key ran at once, want at most 1 (key concurrency 1)", most)
	}
	t.Logf("FIGURES workers skewed -10m, 0, +10m: most jobs of a key at once %d", most)
}
