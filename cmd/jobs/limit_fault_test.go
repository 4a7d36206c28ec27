package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// TestConcurrencyLimitHoldsWhenWorkersAreKilled runs 10,000 jobs under a concurrency
// limit of 50 on 4 worker processes of 20 slots, SIGKILLing one at random every 1.5s (and
// starting another), while sampling the queue's unexpired leases and the handlers running
// in every process: neither ever exceeds 50, every job is done, and the limit is used
// (utilization, sampled running handlers / 50, once a lease has passed since the last
// kill: a dead worker's slots come back when its leases expire).
func TestConcurrencyLimitHoldsWhenWorkersAreKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes for ~10s")
	}
	t.Parallel()
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	prefix := redistest.Prefix(t)
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	ctx := context.Background()
	const n, procs, limit = 10000, 4, 50
	const lease = time.Second
	if err := client.SetLimit(ctx, queue.DefaultQueue, queue.Limit{Concurrency: limit}); err != nil {
		t.Fatal(err)
	}
	batch := make([]queue.BatchJob, n)
	for i := range batch {
		batch[i] = queue.BatchJob{Type: "count", Options: []queue.Option{queue.MaxRetry(50)}}
	}
	if _, err := client.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}

	started := 0
	start := func() (*child, string) {
		started++
		id := fmt.Sprintf("w%d", started)
		return startChild(t, "counting-worker", nil, "JOBS_TEST_REDIS="+srv.Addr, "JOBS_TEST_PREFIX="+prefix,
			"JOBS_TEST_ID="+id, "JOBS_TEST_CONCURRENCY=20", "JOBS_TEST_WORK=20ms", "JOBS_TEST_RUNNING=1",
			"JOBS_TEST_LEASE="+lease.String()), id
	}
	workers, ids := make([]*child, procs), make([]string, procs)
	for i := range workers {
		workers[i], ids[i] = start()
	}

	// The sampler: leases by Redis's clock (what the claims count), handlers running.
	var mu sync.Mutex
	var lastKill time.Time
	mostLeases, mostRunning, samples := 0, int64(0), 0
	var settledSum, settled float64 // running / limit, sampled a lease after the last kill
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ls, err := client.Limits(ctx, queue.DefaultQueue)
			running := rdb.ZCard(ctx, runningKey(prefix)).Val()
			if err != nil || len(ls) != 1 {
				continue
			}
			mu.Lock()
			mostLeases, mostRunning = max(mostLeases, ls[0].Running), max(mostRunning, running)
			samples++
			if time.Since(lastKill) > lease+200*time.Millisecond && rdb.LLen(ctx, prefix+":{default}:ready").Val() > 0 {
				settledSum += float64(running) / limit
				settled++
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()

	kills := 0
	began := time.Now()
	nextKill := began.Add(1500 * time.Millisecond)
	for {
		done := rdb.ZCard(ctx, prefix+":{default}:done").Val()
		if done == n {
			break
		}
		if time.Since(began) > 90*time.Second {
			t.Fatalf("after 90s only %d of %d jobs done", done, n)
		}
		time.Sleep(20 * time.Millisecond)
		if time.Now().After(nextKill) && done < n*8/10 {
			i := rand.IntN(procs)
			workers[i].kill()
			// Its handlers died with it: out of the running set (their leases stay until
			// they expire, and the limit counts them until then).
			for _, m := range rdb.ZRange(ctx, runningKey(prefix), 0, -1).Val() {
				if strings.HasSuffix(m, "@"+ids[i]) {
					rdb.ZRem(ctx, runningKey(prefix), m)
				}
			}
			mu.Lock()
			lastKill = time.Now()
			mu.Unlock()
			workers[i], ids[i] = start()
			kills++
			nextKill = time.Now().Add(1500 * time.Millisecond)
		}
	}
	elapsed := time.Since(began)
	close(stop)
	<-sampled
	for i, w := range workers {
		if err := w.stop(); err != nil {
			t.Errorf("worker %d after SIGTERM: %v\n%s", i, err, w.out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if mostLeases > limit || mostRunning > limit {
		t.Errorf("most unexpired leases %d, most handlers running %d; want at most %d", mostLeases, mostRunning, limit)
	}
	if kills < 2 {
		t.Errorf("only %d kills happened", kills)
	}
	util := 0.0
	if settled > 0 {
		util = settledSum / settled
	}
	// The figure (88-94% on a shared 2-core machine, BENCHMARKS.md) depends on how fast
	// the workers turn a job over, which -race and the package's other tests at once
	// slow down (64% seen then); the bound catches workers that stop claiming, not a
	// slow machine.
	if util < 0.5 {
		t.Errorf("utilization %.1f%% once a lease passed after a kill, want at least 50%%", 100*util)
	}
	t.Logf("FIGURES concurrency limit %d, %d jobs of 20-40ms, %d workers x 20 slots, %d SIGKILLs (every 1.5s) in %s: "+
		"most leases %d, most handlers running %d (%d samples), utilization %.1f%% (running/limit, sampled a lease after the last kill)",
		limit, n, procs, kills, elapsed.Round(100*time.Millisecond), mostLeases, mostRunning, samples, 100*util)
}
