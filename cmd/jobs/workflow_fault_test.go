package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// eventsOf counts the events named name of job id in a queue's stream (KEYS.md: one
// line per event, its name and the job's ID first, tab-separated, or the job's ID alone
// for a repeat of the event before).
func eventsOf(ctx context.Context, t *testing.T, rdb *redis.Client, prefix, q, id string, name queue.EventName) int {
	t.Helper()
	entries, err := rdb.XRange(ctx, queueKeys{prefix, q}.key("events"), "-", "+").Result()
	if err != nil {
		t.Fatalf("XRANGE events of %s err = %v", q, err)
	}
	n := 0
	for _, e := range entries {
		// A line without a tab is the event of the line before it again, for the job it
		// names.
		last := ""
		for _, line := range strings.Split(fmt.Sprint(e.Values["event"]), "\n") {
			ev, job, full := strings.Cut(line, "\t")
			if full {
				last = ev
				job, _, _ = strings.Cut(job, "\t")
			} else {
				ev, job = last, line
			}
			if ev == string(name) && job == id {
				n++
			}
		}
	}
	return n
}

// faultSetup is a fault test's shared Redis, a client of it, the test's prefix and a
// queue.Client under it.
func faultSetup(t *testing.T) (*redistest.Server, *redis.Client, string, *queue.Client) {
	t.Helper()
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	prefix := redistest.Prefix(t)
	client, err := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return srv, rdb, prefix, client
}

// A dependency whose worker is SIGKILLed mid-run is reaped and retried; its dependent,
// in another queue, is released once, when the retry is done, and runs once.
func TestDependencyKilledMidRunReleasesItsDependentOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	t.Parallel()
	srv, rdb, prefix, client := faultSetup(t)
	ctx := context.Background()
	dep, err := client.Enqueue(ctx, "count", nil, queue.On("dep"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := client.Enqueue(ctx, "count", nil, queue.AfterJob("dep", dep))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"JOBS_TEST_REDIS=" + srv.Addr, "JOBS_TEST_PREFIX=" + prefix, "JOBS_TEST_QUEUES=dep,default",
		"JOBS_TEST_WORK=1s"}
	w := startChild(t, "counting-worker", nil, append(env, "JOBS_TEST_ID=w1")...)
	waitFor(t, 20*time.Second, "the dependency to start", func() bool {
		return runCounts(ctx, rdb, prefix)[dep] == 1
	})
	w.kill()
	if j, _ := client.Get(ctx, queue.DefaultQueue, d); j.State != queue.StateWaiting {
		t.Fatalf("dependent after the kill: %s, want waiting", j.State)
	}
	w2 := startChild(t, "counting-worker", nil, append(env, "JOBS_TEST_ID=w2")...)
	waitFor(t, 30*time.Second, "the dependent to be done", func() bool {
		j, err := client.Get(ctx, queue.DefaultQueue, d)
		return err == nil && j.State == queue.StateDone
	})
	if err := w2.stop(); err != nil {
		t.Errorf("worker after SIGTERM: %v\n%s", err, w2.out)
	}
	runs := runCounts(ctx, rdb, prefix)
	if runs[dep] != 2 || runs[d] != 1 {
		t.Errorf("runs: dependency %d (want 2: killed, then retried), dependent %d (want 1)", runs[dep], runs[d])
	}
	j, _ := client.Get(ctx, "dep", dep)
	if len(j.Attempts) < 1 || j.Attempts[0].Outcome != "reaped" {
		t.Errorf("dependency's attempts = %+v, want the first reaped", j.Attempts)
	}
	if n := eventsOf(ctx, t, rdb, prefix, queue.DefaultQueue, d, queue.EventEnqueued); n != 1 {
		t.Errorf("dependent released %d times, want once", n)
	}
}

// A batch run through a storm of worker SIGKILLs: every child ends done, the batch
// succeeds, and each callback (in another queue: delivered through the outbox) is
// enqueued exactly once. 2,000 children; JOBS_TEST_LONG=1 runs the 10,000.
func TestBatchCallbacksOnceThroughWorkerKills(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes for ~15s")
	}
	t.Parallel()
	srv, rdb, prefix, client := faultSetup(t)
	ctx := context.Background()
	n := 2000
	if os.Getenv("JOBS_TEST_LONG") != "" {
		n = 10000
	}
	const procs = 4
	jobs := make([]queue.BatchJob, n)
	for i := range jobs {
		jobs[i] = queue.BatchJob{Type: "count", Options: []queue.Option{queue.MaxRetry(50)}}
	}
	ref, _, err := client.NewBatch(ctx, queue.BatchOptions{Queue: "cb", OnComplete: &queue.Callback{Type: "count"},
		OnSuccess: &queue.Callback{Type: "count"}, OnDeath: &queue.Callback{Type: "count"}}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	start := func() *child {
		started++
		return startChild(t, "counting-worker", nil, "JOBS_TEST_REDIS="+srv.Addr, "JOBS_TEST_PREFIX="+prefix,
			fmt.Sprintf("JOBS_TEST_ID=w%d", started), "JOBS_TEST_CONCURRENCY=16", "JOBS_TEST_WORK=50ms",
			"JOBS_TEST_QUEUES=default,cb")
	}
	workers := make([]*child, procs)
	for i := range workers {
		workers[i] = start()
	}
	kills := 0
	began := time.Now()
	for {
		st, err := client.BatchStatus(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		cb, _ := client.Get(ctx, "cb", ref.ID+".success")
		if st.State == queue.BatchSucceeded && cb != nil && cb.State == queue.StateDone {
			break
		}
		if time.Since(began) > 120*time.Second {
			t.Fatalf("after 120s: batch %+v, success callback %v", st, cb)
		}
		time.Sleep(250 * time.Millisecond)
		if st.Done < int64(n)*9/10 {
			i := rand.IntN(len(workers))
			workers[i].kill()
			workers[i] = start()
			kills++
		}
	}
	st, _ := client.BatchStatus(ctx, ref)
	if st.Total != int64(n) || st.Done != int64(n) || st.Dead != 0 || st.Pending != 0 {
		t.Errorf("batch = %+v, want %d done", st, n)
	}
	if !st.Callbacks["complete"].Fired || !st.Callbacks["success"].Fired || st.Callbacks["death"].Fired {
		t.Errorf("callbacks = %+v, want complete and success fired, death not", st.Callbacks)
	}
	for _, kind := range []string{"complete", "success"} {
		if got := eventsOf(ctx, t, rdb, prefix, "cb", ref.ID+"."+kind, queue.EventEnqueued); got != 1 {
			t.Errorf("%s callback enqueued %d times, want once", kind, got)
		}
	}
	if keys, _ := rdb.Keys(ctx, prefix+":{*}:outbox").Result(); len(keys) != 0 {
		t.Errorf("outboxes left: %v", keys)
	}
	for i, w := range workers {
		if err := w.stop(); err != nil && !strings.Contains(err.Error(), "signal") {
			t.Errorf("worker %d after SIGTERM: %v\n%s", i, err, w.out)
		}
	}
	t.Logf("FIGURES batch-kill: %d children, %d worker processes x 16 slots, %d SIGKILLs in %s: callbacks once",
		n, procs, kills, time.Since(began).Round(100*time.Millisecond))
	if kills < 5 {
		t.Errorf("only %d kills happened; the test did not exercise recovery", kills)
	}
}
