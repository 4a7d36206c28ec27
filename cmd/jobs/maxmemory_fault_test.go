package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// TestMaxmemory fills a redis-server that has maxmemory and noeviction until it refuses
// enqueues, then checks that `jobs enqueue` says so in one line with exit 1, that the
// refusals left no half-written job, and that a `jobs worker` started on the full Redis
// runs and acks every queued job (an ack frees memory, so Redis must let it through).
func TestMaxmemory(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a redis-server to its maxmemory")
	}
	t.Parallel()
	// 3mb: about 1.1 MB of it is Redis at startup and the scripts' cache, so at 2mb the
	// purge left under 100 KB of room, less than the room the enqueue below needs.
	srv := redistest.Own(t, "--maxmemory", "3mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	k := queueKeys{prefix, queue.DefaultQueue}
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	// Events stay on (every XADD below comes after its script's first write, a removal),
	// capped at 20 entries: an entry holds one call's events (each fill below writes 100
	// in one), and the stream would otherwise keep every event of this test, so the purge
	// at the end could not make room (at 1000 entries it does not).
	base := []string{"--redis", "redis://" + srv.Addr, "--prefix", prefix, "--events", "20"}

	payload := []byte(strings.Repeat("p", 100))
	batch := make([]queue.BatchJob, 100)
	for i := range batch {
		batch[i] = queue.BatchJob{Type: "ok", Payload: payload}
	}
	queued := 0
	var fillErr error
	for fillErr == nil {
		var res []queue.BatchResult
		res, fillErr = client.EnqueueBatch(ctx, batch)
		for _, r := range res {
			if r.Err == nil {
				queued++
			}
		}
		if queued > 100_000 {
			t.Fatalf("%d jobs enqueued into 3mb: maxmemory is not enforced", queued)
		}
	}
	if !redis.IsOOMError(fillErr) {
		t.Fatalf("filling Redis stopped on %v, want Redis's OOM refusal", fillErr)
	}
	// Pin the limit 128 KB under what the fill left in use: Redis frees idle connections'
	// buffers in the background (about 95 KB once the fill's connections go quiet), which
	// made room for the one more job below in about 1 run in 3 on a loaded machine.
	used, err := strconv.ParseInt(rdb.InfoMap(ctx, "memory").Val()["Memory"]["used_memory"], 10, 64)
	if err != nil {
		t.Fatalf("used_memory: %v", err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used-128<<10, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	r := runCLI("", append(base, "enqueue", "ok", "one more")...)
	if r.code != exitError || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "out of memory") ||
		!strings.Contains(r.stderr, "refused the write") || r.stdout != "" {
		t.Errorf("jobs enqueue on a full Redis = %+v; want exit 1 and one line saying Redis is out of memory", r)
	}
	f := runCLI(`{"type":"ok"}`+"\n"+`{"type":"ok"}`+"\n", append(base, "enqueue", "--file", "-")...)
	if f.code != exitError || strings.Count(f.stderr, "\n") != 1 || !strings.Contains(f.stderr, "out of memory") {
		t.Errorf("jobs enqueue --file on a full Redis = %+v; want exit 1 and one line saying Redis is out of memory", f)
	}
	// A refused enqueue wrote nothing: every job hash is in the ready list and back.
	if bad := inconsistencies(ctx, rdb, k); len(bad) > 0 {
		t.Errorf("half-written jobs after the refusals: %q", bad[:min(len(bad), 10)])
	}
	if n := rdb.LLen(ctx, k.key("ready")).Val(); n != int64(queued) {
		t.Errorf("%d jobs ready, want the %d acknowledged", n, queued)
	}
	info := rdb.InfoMap(ctx, "memory").Val()["Memory"]

	// A worker drains the full Redis: claims, heartbeats and acks free memory first.
	began := time.Now()
	w := startCLI(t, append(base, "worker", "--concurrency", "8", "--lease", "2s", "--run", "ok=true", "--log-level", "warn")...)
	waitFor(t, 60*time.Second, "every queued job done", func() bool {
		return rdb.ZCard(ctx, k.key("done")).Val() == int64(queued) && idle(ctx, rdb, prefix)
	})
	drained := time.Since(began)
	if got := acks(ctx, rdb, k); got != int64(queued) {
		t.Errorf("%d acks for %d jobs", got, queued)
	}
	if d, rt := rdb.ZCard(ctx, k.key("dead")).Val(), rdb.ZCard(ctx, k.key("retry")).Val(); d+rt > 0 {
		t.Errorf("%d dead and %d retrying jobs: acks or heartbeats were refused", d, rt)
	}
	if err := w.stop(); err != nil {
		t.Errorf("worker exit: %v\n%s", err, w.out)
	}
	if strings.Contains(w.out.String(), "OOM") {
		t.Errorf("the worker met OOM refusals:\n%s", w.out)
	}
	// Done jobs are kept (24h by default), so draining alone frees little; purging them
	// makes room again, as the error suggests.
	after := runCLI("", append(base, "enqueue", "ok")...)
	if p := runCLI("", append(base, "purge", queue.DefaultQueue, "--state", "done", "--yes")...); p.code != 0 {
		t.Errorf("purge on the full Redis = %+v", p)
	}
	// Redis frees a closed connection's buffers when it notices the close; on a loaded
	// machine the worker's last connections may still count for a moment.
	again := runCLI("", append(base, "enqueue", "ok")...)
	for deadline := time.Now().Add(3 * time.Second); again.code != 0 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		again = runCLI("", append(base, "enqueue", "ok")...)
	}
	if again.code != 0 {
		mem := rdb.InfoMap(ctx, "memory").Val()["Memory"]
		var sizes []string
		for it := rdb.Scan(ctx, 0, "*", 100).Iterator(); it.Next(ctx); {
			if n, err := rdb.MemoryUsage(ctx, it.Val()).Result(); err == nil && n > 4096 {
				sizes = append(sizes, fmt.Sprintf("%s=%d", it.Val(), n))
			}
		}
		t.Errorf("enqueue after purging the done jobs = %+v; used_memory %s, dataset %s, keys over 4 KiB: %v",
			again, mem["used_memory"], mem["used_memory_dataset"], sizes)
	}
	t.Logf("FIGURES maxmemory 3mb noeviction: %d jobs (100-byte payloads) filled it (used_memory %s, maxmemory %s); "+
		"jobs enqueue then: exit %d, %q; consistency scan clean; a worker ran and acked all %d in %s, 0 retried, 0 dead; "+
		"jobs enqueue after the drain (done jobs kept 24h): exit %d %q; after jobs purge --state done: exit 0",
		queued, info["used_memory_human"], info["maxmemory_human"], r.code, strings.TrimSpace(r.stderr), queued,
		drained.Round(time.Millisecond), after.code, strings.TrimSpace(after.stderr))
}
