package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// TestNoJobLostWhenWorkersAreKilled runs 10,000 jobs on 4 worker processes while
// SIGKILLing one at random every 250ms (and starting a new one in its place), then checks
// that every job is done and was acked once: delivery is at-least-once, so runs repeated
// by a kill are counted as duplicates, never as losses.
func TestNoJobLostWhenWorkersAreKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes for ~20s")
	}
	t.Parallel()
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	prefix := redistest.Prefix(t)
	k := queueKeys{prefix, queue.DefaultQueue}
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	ctx := context.Background()
	const n, procs = 10000, 4
	batch := make([]queue.BatchJob, n)
	for i := range batch {
		// Attempts are counted on every reap; enough of them that kills never dead-letter.
		batch[i] = queue.BatchJob{Type: "count", Payload: fmt.Appendf(nil, "%d", i),
			Options: []queue.Option{queue.MaxRetry(50)}}
	}
	res, err := client.EnqueueBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}

	started := 0
	start := func() *child {
		started++
		return startChild(t, "counting-worker", nil, "JOBS_TEST_REDIS="+srv.Addr, "JOBS_TEST_PREFIX="+prefix,
			fmt.Sprintf("JOBS_TEST_ID=w%d", started), "JOBS_TEST_CONCURRENCY=16", "JOBS_TEST_WORK=40ms")
	}
	workers := make([]*child, procs)
	for i := range workers {
		workers[i] = start()
	}
	var all []*child // every process, for the logs
	all = append(all, workers...)

	kills := 0
	began := time.Now()
	const limit = 90 * time.Second
	for {
		done := rdb.ZCard(ctx, k.key("done")).Val()
		if done == n && idle(ctx, rdb, prefix) {
			break
		}
		if time.Since(began) > limit {
			t.Fatalf("after %s only %d of %d jobs done", limit, done, n)
		}
		time.Sleep(250 * time.Millisecond)
		if done < n*9/10 { // kill while most jobs are still to run; then let them finish
			i := rand.IntN(len(workers))
			workers[i].kill()
			workers[i] = start()
			all = append(all, workers[i])
			kills++
		}
	}
	elapsed := time.Since(began)

	var lost int
	for _, r := range res {
		j, err := client.Get(ctx, queue.DefaultQueue, r.ID)
		if err != nil || j.State != queue.StateDone {
			lost++
			t.Errorf("job %s: %v, %v; want done", r.ID, j, err)
		}
	}
	runs, dups := runCounts(ctx, rdb, prefix), 0
	for _, r := range res {
		dups += max(runs[r.ID]-1, 0)
	}
	if got := acks(ctx, rdb, k); got != n {
		t.Errorf("%d acks for %d jobs: a job was acked twice or not at all", got, n)
	}
	if bad := inconsistencies(ctx, rdb, k); len(bad) > 0 {
		t.Errorf("inconsistent keys: %q", bad[:min(len(bad), 10)])
	}
	// Each survivor stops cleanly on SIGTERM; its log is read after.
	for i, w := range workers {
		if err := w.stop(); err != nil {
			t.Errorf("worker %d after SIGTERM: %v\n%s", i, err, w.out)
		}
	}
	refused := 0
	for _, w := range all {
		refused += strings.Count(w.out.String(), "job lost its lease before it finished")
	}
	t.Logf("FIGURES kill: %d jobs, %d worker processes x 16 slots, %d SIGKILLs (one per 250ms) in %s: "+
		"lost %d, duplicate runs %d (%.2f%%), late acks refused %d, acks %d",
		n, procs, kills, elapsed.Round(100*time.Millisecond), lost, dups, 100*float64(dups)/n, refused, acks(ctx, rdb, k))
	if kills < 10 {
		t.Errorf("only %d kills happened; the test did not exercise recovery", kills)
	}
}

// idle reports whether the default queue has no job waiting or running.
func idle(ctx context.Context, rdb *redis.Client, prefix string) bool {
	k := queueKeys{prefix, queue.DefaultQueue}
	n := rdb.LLen(ctx, k.key("ready")).Val() + rdb.ZCard(ctx, k.key("active")).Val() +
		rdb.ZCard(ctx, k.key("retry")).Val() + rdb.ZCard(ctx, k.key("scheduled")).Val()
	return n == 0
}
