package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
	"github.com/redis/go-redis/v9"
)

// countingWorker is the child process of the fault test: a real worker whose handler
// counts each run of a job in a Redis hash (so the parent sees duplicates) and takes a
// few tens of milliseconds, so a SIGKILL always catches jobs mid-run.
func countingWorker() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("JOBS_TEST_REDIS")})
	prefix := os.Getenv("JOBS_TEST_PREFIX")
	client, err := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	runs := prefix + ":test:runs"
	w, err := worker.New(client, worker.Config{
		Concurrency: 8,
		Lease:       time.Second,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		Handler: worker.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			time.Sleep(time.Duration(20+rand.IntN(40)) * time.Millisecond)
			return rdb.HIncrBy(ctx, runs, j.ID, 1).Err()
		}),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := w.Run(ctx); err != nil {
		return 1
	}
	return 0
}

// TestNoJobLostWhenWorkersAreKilled runs 3,000 jobs on 4 worker processes while SIGKILLing
// one at random every 250ms (and starting a new one in its place), then checks that every
// job is done: delivery is at-least-once, so duplicates are counted, never losses.
func TestNoJobLostWhenWorkersAreKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes for ~10s")
	}
	t.Parallel()
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	prefix := redistest.Prefix(t)
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	const n = 3000
	batch := make([]queue.BatchJob, n)
	for i := range batch {
		// Attempts are counted on every reap; enough of them that kills never dead-letter.
		batch[i] = queue.BatchJob{Type: "count", Payload: fmt.Appendf(nil, "%d", i),
			Options: []queue.Option{queue.MaxRetry(50)}}
	}
	res, err := client.EnqueueBatch(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "JOBS_TEST_CHILD=counting-worker",
			"JOBS_TEST_REDIS="+srv.Addr, "JOBS_TEST_PREFIX="+prefix)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	workers := make([]*exec.Cmd, 4)
	for i := range workers {
		workers[i] = start()
	}
	defer func() {
		for _, w := range workers {
			w.Process.Kill()
			w.Wait()
		}
	}()

	ctx := context.Background()
	runs := prefix + ":test:runs"
	kills := 0
	began := time.Now()
	deadline := began.Add(90 * time.Second)
	for {
		done := rdb.HLen(ctx, runs).Val()
		if done == n && idle(ctx, rdb, prefix) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90s only %d of %d jobs ran", done, n)
		}
		time.Sleep(250 * time.Millisecond)
		if done < n*9/10 { // kill while most jobs are still to run; then let them finish
			i := rand.IntN(len(workers))
			workers[i].Process.Kill()
			workers[i].Wait()
			workers[i] = start()
			kills++
		}
	}
	elapsed := time.Since(began)

	var lost, dups int64
	counts := rdb.HGetAll(ctx, runs).Val()
	for _, r := range res {
		j, err := client.Get(ctx, queue.DefaultQueue, r.ID)
		if err != nil || j.State != queue.StateDone {
			lost++
			t.Errorf("job %s: %v, %v; want done", r.ID, j, err)
			continue
		}
		var c int64
		fmt.Sscan(counts[r.ID], &c)
		dups += c - 1
	}
	t.Logf("%d jobs, 4 workers, %d SIGKILLs in %s: lost %d, duplicate runs %d",
		n, kills, elapsed.Round(time.Millisecond), lost, dups)
	if kills < 5 {
		t.Errorf("only %d kills happened; the test did not exercise recovery", kills)
	}

	// Surviving workers stop cleanly on SIGTERM.
	for i, w := range workers {
		w.Process.Signal(syscall.SIGTERM)
		if err := w.Wait(); err != nil {
			t.Errorf("worker %d after SIGTERM: %v", i, err)
		}
		workers[i] = exec.Command("true") // nothing left to kill in the deferred cleanup
		workers[i].Run()
	}
}

// idle reports whether the default queue has no job waiting or running.
func idle(ctx context.Context, rdb *redis.Client, prefix string) bool {
	base := prefix + ":{" + queue.DefaultQueue + "}:"
	n := rdb.LLen(ctx, base+"ready").Val() + rdb.ZCard(ctx, base+"active").Val() +
		rdb.ZCard(ctx, base+"retry").Val() + rdb.ZCard(ctx, base+"scheduled").Val()
	return n == 0
}
