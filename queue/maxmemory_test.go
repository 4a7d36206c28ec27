package queue

import (
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// Redis at maxmemory with noeviction refuses enqueues, but the jobs already queued must
// still run to the end: claim, heartbeat, fail and ack all go through (they free memory or
// keep it level). If ack or heartbeat were refused, every claimed job would lose its lease
// and burn its retries while Redis is full.
func TestFullRedisRefusesEnqueuesButFinishesJobs(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("starts its own single redis-server")
	}
	srv, err := redistest.Start("--maxmemory", "3mb", "--maxmemory-policy", "noeviction")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := NewClient(srv.Client(t), Config{Prefix: "mm"})
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(strings.Repeat("p", 200))
	var enqueued int
	var refused error
	for enqueued < 100000 && refused == nil {
		if _, refused = c.Enqueue(ctx, "a", payload); refused == nil {
			enqueued++
		}
	}
	if refused == nil || !strings.Contains(refused.Error(), "OOM") {
		t.Fatalf("after %d enqueues err = %v, want Redis's OOM refusal", enqueued, refused)
	}
	t.Logf("Redis full after %d jobs: %v", enqueued, refused)
	if n, _ := c.rdb.LLen(ctx, c.keys.queue("default").ready).Result(); int(n) != enqueued {
		t.Fatalf("ready holds %d jobs, want the %d acknowledged (the refused one half-written?)", n, enqueued)
	}

	jobs, err := c.Claim(ctx, "default", 20, time.Minute, "w")
	if err != nil || len(jobs) != 20 {
		t.Fatalf("Claim on a full Redis = %d jobs, %v; want 20", len(jobs), err)
	}
	if lost, _, err := c.Heartbeat(ctx, "default", time.Minute, jobs); err != nil || len(lost) != 0 {
		t.Fatalf("Heartbeat on a full Redis: lost %v, err %v", lost, err)
	}
	for _, j := range jobs[:10] {
		if err := c.Ack(ctx, j, []byte("ok")); err != nil {
			t.Fatalf("Ack on a full Redis: %v", err)
		}
	}
	for _, j := range jobs[10:] {
		if st, err := c.Fail(ctx, j, "boom", time.Hour); err != nil || st != StateRetry {
			t.Fatalf("Fail on a full Redis = %s, %v; want retry", st, err)
		}
	}
	stats, err := c.Stats(ctx)
	if err != nil || len(stats) != 1 {
		t.Fatalf("Stats = %+v, %v", stats, err)
	}
	if counts := stats[0]; counts.Active != 0 || counts.Done != 10 || counts.Retry != 10 {
		t.Errorf("after acks and fails on a full Redis: %+v; want 0 active, 10 done, 10 retry", counts)
	}
}
