package worker

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// quiet is a logger for tests whose workers run thousands of jobs.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// enqueueMany enqueues n jobs of type "t" on q.
func enqueueMany(t *testing.T, c *queue.Client, q string, n int) {
	t.Helper()
	batch := make([]queue.BatchJob, n)
	for i := range batch {
		batch[i] = queue.BatchJob{Type: "t", Options: []queue.Option{queue.On(q)}}
	}
	if _, err := c.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
}

// startsPerSecond sorts starts (at least two) and returns the most of them in any 1s
// window and their mean rate per second, first to last.
func startsPerSecond(starts []time.Time) (most int, mean float64) {
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	for i := range starts {
		j, _ := slices.BinarySearchFunc(starts, starts[i].Add(time.Second), func(a, b time.Time) int { return a.Compare(b) })
		most = max(most, j-i)
	}
	return most, float64(len(starts)-1) / starts[len(starts)-1].Sub(starts[0]).Seconds()
}

// gauge counts handlers running now and the most seen at once.
type gauge struct{ now, most atomic.Int64 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// Concurrency 5 on a queue served by 3 workers of 8 slots: running handlers, and the
// queue's unexpired leases sampled all along, never exceed 5, and the limit is used.
func TestConcurrencyLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	const limit, n = 5, 400
	if err := c.SetLimit(ctx, "default", queue.Limit{Concurrency: limit}); err != nil {
		t.Fatal(err)
	}
	enqueueMany(t, c, "default", n)
	var g gauge
	var done atomic.Int64
	var busy atomic.Int64 // handler time, for the utilization
	h := HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		g.enter()
		d := time.Duration(1+rand.IntN(4)) * time.Millisecond
		time.Sleep(d)
		busy.Add(int64(d))
		g.leave()
		done.Add(1)
		return nil
	})
	began := time.Now()
	for range 3 {
		startWorker(t, c, Config{Handler: h, Concurrency: 8, Logger: quiet})
	}
	sampled := 0
	for done.Load() < n {
		s, err := c.Limits(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		sampled = max(sampled, s[0].Running)
		if time.Since(began) > 20*time.Second {
			t.Fatalf("%d of %d jobs done after 20s", done.Load(), n)
		}
	}
	took := time.Since(began)
	if g.most.Load() > limit || sampled > limit {
		t.Errorf("most handlers running at once %d, most leases sampled %d; want <= %d", g.most.Load(), sampled, limit)
	}
	if g.most.Load() < limit {
		t.Errorf("most handlers running at once %d, want the limit %d reached", g.most.Load(), limit)
	}
	t.Logf("FIGURES concurrency %d, 3 workers x 8 slots, %d jobs of 1-4ms: %s, utilization %.0f%% (handler time / (limit x wall time))",
		limit, n, took.Round(time.Millisecond), 100*float64(busy.Load())/float64(limit)/float64(took))
}

// Rate 20/s across 3 workers for 10s (issue 16): starts (their token instants, by Redis's
// clock) in any 1s window never exceed 20 (burst 1), and the mean rate is 20/s within 2%,
// the time lost to claims the loaded machine sent late left out (rateKept): a claim takes
// the tokens due within 20ms, so a worker whose timer fires a little late loses nothing.
// Not parallel: the package's other tests, run at once, would make the workers later.
func TestRateLimitAcrossWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for 10s")
	}
	c := newClient(t)
	if err := c.SetLimit(ctx, "default", queue.Limit{Rate: 20, Period: time.Second}); err != nil {
		t.Fatal(err)
	}
	enqueueMany(t, c, "default", 300)
	var mu sync.Mutex
	var starts []time.Time
	h := HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		starts = append(starts, j.StartedAt)
		mu.Unlock()
		return nil
	})
	var rec claimLateness
	var stops []func()
	for range 3 {
		stops = append(stops, startTimedWorker(t, c, Config{Handler: h, Concurrency: 4, Logger: quiet}, &rec))
	}
	time.Sleep(10 * time.Second)
	for _, stop := range stops {
		stop()
	}
	mu.Lock()
	defer mu.Unlock()
	rec.rateKept(t, "rate 20/s, 3 workers, 10s", starts, 20, time.Second)
}

// A worker waiting on one queue's rate (next token in an hour) picks up another queue's
// jobs as fast as ever, and a limit raised live applies at once: its notice ends the wait.
func TestLimitedQueueLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	if err := c.SetLimit(ctx, "slow", queue.Limit{Rate: 1, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	enqueueMany(t, c, "slow", 20)
	var slow atomic.Int64
	started := make(chan time.Time, 1)
	h := HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		if j.Queue == "slow" {
			slow.Add(1)
			return nil
		}
		started <- time.Now()
		return nil
	})
	startWorker(t, c, Config{Handler: h, Concurrency: 4, Logger: quiet, Queues: map[string]int{"slow": 1, "fast": 1}})
	eventually(t, 5*time.Second, "the slow queue's one token used", func() bool { return slow.Load() == 1 })
	var pickups []time.Duration
	for range 20 {
		sent := time.Now()
		enqueue(t, c, "t", "", queue.On("fast"))
		select {
		case at := <-started:
			pickups = append(pickups, at.Sub(sent))
		case <-time.After(5 * time.Second):
			t.Fatal("a job of the unlimited queue did not start within 5s")
		}
	}
	// A worker held up by the other queue's wait would be slow on every pickup (its wait
	// lasts an hour). One pickup may meet a stall of the test process itself (CI's cluster
	// pass, -race, beside the queue package's tests: 117 ms once): the second slowest is
	// held to 100 ms, the slowest to a second.
	slices.Sort(pickups)
	worst := pickups[len(pickups)-1]
	if second := pickups[len(pickups)-2]; second > 100*time.Millisecond || worst > time.Second {
		t.Errorf("pickups on the unlimited queue: second slowest %v, slowest %v; want under 100ms and 1s", second, worst)
	}
	if n := slow.Load(); n != 1 {
		t.Errorf("%d jobs of the slow queue ran, want 1 (rate 1/h)", n)
	}
	changed := time.Now()
	if err := c.SetLimit(ctx, "slow", queue.Limit{Rate: 1000, Period: time.Second, Burst: 100}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the slow queue drained after its rate was raised", func() bool { return slow.Load() == 20 })
	t.Logf("FIGURES unlimited queue beside one waiting on its rate: slowest pickup of 20 %v; the rest of the limited queue ran %v after the rate was raised",
		worst.Round(time.Microsecond), time.Since(changed).Round(time.Millisecond))
}

// A concurrency limit raised live applies at once: the worker waiting on it claims on the
// notice, not when a slot frees.
func TestConcurrencyLimitRaisedLive(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	if err := c.SetLimit(ctx, "default", queue.Limit{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	enqueueMany(t, c, "default", 10)
	var g gauge
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		g.enter()
		defer g.leave()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	startWorker(t, c, Config{Handler: h, Concurrency: 4, Logger: quiet})
	eventually(t, 5*time.Second, "one job running", func() bool { return g.now.Load() == 1 })
	time.Sleep(100 * time.Millisecond)
	if n := g.now.Load(); n != 1 {
		t.Fatalf("%d jobs running under concurrency 1", n)
	}
	changed := time.Now()
	if err := c.SetLimit(ctx, "default", queue.Limit{Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "three jobs running after the limit was raised", func() bool { return g.now.Load() == 3 })
	took := time.Since(changed)
	time.Sleep(100 * time.Millisecond)
	if n := g.most.Load(); n != 3 {
		t.Errorf("most running %d, want 3", n)
	}
	close(release)
	t.Logf("FIGURES concurrency raised 1 -> 3 live: 3 running %v later", took.Round(time.Microsecond))
}
