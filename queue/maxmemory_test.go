package queue

import (
	"errors"
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
	c := fullRedisClient(t, "3mb", "mm")
	enqueued := fill(t, c, "a")
	t.Logf("Redis full after %d jobs", enqueued)
	if n, _ := c.rdb.LLen(ctx, c.keys.queue("default").ready).Result(); int(n) != enqueued {
		t.Fatalf("ready holds %d jobs, want the %d acknowledged (the refused one half-written?)", n, enqueued)
	}

	// Every transition below also writes its event (XADD, a deny-oom command) after its
	// first write, a removal: Redis must accept those too. entries-added counts them,
	// however the stream is trimmed.
	added := func() int64 {
		info, err := c.rdb.XInfoStream(ctx, c.keys.queue("default").events).Result()
		if err != nil {
			t.Fatalf("XINFO STREAM events: %v", err)
		}
		return info.EntriesAdded
	}
	before := added()
	jobs, err := c.broker().Claim(ctx, "default", 20, time.Minute, "w")
	if err != nil || len(jobs) != 20 {
		t.Fatalf("Claim on a full Redis = %d jobs, %v; want 20", len(jobs), err)
	}
	if lost, _, err := c.broker().Heartbeat(ctx, "default", time.Minute, jobs); err != nil || len(lost) != 0 {
		t.Fatalf("Heartbeat on a full Redis: lost %v, err %v", lost, err)
	}
	for _, j := range jobs[:10] {
		if err := c.broker().Ack(ctx, j, []byte("ok")); err != nil {
			t.Fatalf("Ack on a full Redis: %v", err)
		}
	}
	for _, j := range jobs[10:] {
		if st, err := c.broker().Fail(ctx, j, "boom", time.Hour); err != nil || st != StateRetry {
			t.Fatalf("Fail on a full Redis = %s, %v; want retry", st, err)
		}
	}
	// Entries of up to 16 events: the claim's 20 events in two (16 and 4, the second
	// XADD too after the call's first write), each ack's and fail's in its own.
	if n := added() - before; n != 22 {
		t.Errorf("a full Redis took %d entries for 1 claim of 20, 10 acks and 10 fails, want 22", n)
	}
	last, err := c.rdb.XRevRangeN(ctx, c.keys.queue("default").events, "+", "-", 22).Result()
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for _, m := range last {
		events += len(decodeEntry("default", m))
	}
	if events != 40 {
		t.Errorf("a full Redis took %d events for 20 claims, 10 acks and 10 fails, want 40", events)
	}
	stats, err := c.Stats(ctx)
	if err != nil || len(stats) != 1 {
		t.Fatalf("Stats = %+v, %v", stats, err)
	}
	if counts := stats[0]; counts.Active != 0 || counts.Done != 10 || counts.Retry != 10 {
		t.Errorf("after acks and fails on a full Redis: %+v; want 0 active, 10 done, 10 retry", counts)
	}

	// A worker's combined call: acks first, so its first write frees memory too.
	_, claimed, err := c.broker().ackFinished(ctx, "default", nil, 2, time.Minute, "w")
	if err != nil || len(claimed) != 2 {
		t.Fatalf("AckClaim(claim 2) on a full Redis = %d jobs, %v; want 2", len(claimed), err)
	}
	acked, next, err := c.broker().ackFinished(ctx, "default",
		[]Finished{{Job: claimed[0], Result: []byte("ok")}, {Job: claimed[1], Result: []byte("ok")}}, 2, time.Minute, "w")
	if err != nil || len(next) != 2 || len(acked) != 2 || acked[0] != nil || acked[1] != nil {
		t.Fatalf("AckClaim(ack 2, claim 2) on a full Redis = acked %v, %d jobs, %v; want both acked, 2 claimed",
			acked, len(next), err)
	}
	if stats, err = c.Stats(ctx); err != nil || stats[0].Done != 12 || stats[0].Active != 2 {
		t.Errorf("after AckClaim on a full Redis: %+v, %v; want 12 done, 2 active", stats, err)
	}
}

// A one-queue batch on a Redis that fills up part way used to return a nil error with the
// refused half's failure only in the results. The error now lists every job that was not
// enqueued, and the results match Redis job for job.
func TestBatchOnFullRedisListsRefusedJobs(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("starts its own single redis-server")
	}
	t.Parallel()
	c := fullRedisClient(t, "4mb", "mm")
	batch := make([]BatchJob, 3000)
	for i := range batch {
		batch[i] = BatchJob{Type: "a", Payload: []byte(strings.Repeat("p", 2000))}
	}
	res, err := c.EnqueueBatch(ctx, batch)
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failed) == 0 || len(be.Failed) == len(batch) || len(be.Uncertain) != 0 {
		t.Fatalf("EnqueueBatch() filling Redis err = %v; want a *BatchError with some jobs failed, not all", err)
	}
	if len(res) != len(batch) || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("EnqueueBatch() = %d results, %v; want %d and the OOM cause", len(res), err, len(batch))
	}
	failed := map[int]bool{}
	for _, i := range be.Failed {
		failed[i] = true
	}
	for i, r := range res {
		exists := c.rdb.Exists(ctx, c.keys.queue("default").job(r.ID)).Val() == 1
		if failed[i] != (r.Err != nil) || exists == failed[i] {
			t.Fatalf("job %d: failed %v, result err %v, in Redis %v; want the three to agree", i, failed[i], r.Err, exists)
		}
	}
	t.Logf("%d of %d jobs refused", len(be.Failed), len(batch))
}

// fill enqueues jobs of type typ with 200-byte payloads on the default queue until Redis
// refuses one, fails the test unless Redis's OOM refusal stopped it, and returns how many
// it enqueued. Jobs of the size the tests then write: client buffers count in Redis's
// memory, so a smaller call could pass where a larger one was refused.
// fullRedisClient is a Client with prefix over a redis-server of the test's own that
// holds at most maxmemory ("3mb") and evicts nothing, as a Redis filled to its limit
// refuses writes.
func fullRedisClient(t *testing.T, maxmemory, prefix string) *Client {
	t.Helper()
	srv := redistest.Own(t, "--maxmemory", maxmemory, "--maxmemory-policy", "noeviction")
	c, err := NewClient(srv.Client(t), Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fill(t *testing.T, c *Client, typ string) int {
	t.Helper()
	payload := []byte(strings.Repeat("p", 200))
	n := 0
	for ; n < 100000; n++ {
		if _, err := c.Enqueue(ctx, typ, payload); err != nil {
			if !strings.Contains(err.Error(), "OOM") {
				t.Fatalf("after %d enqueues err = %v, want Redis's OOM refusal", n, err)
			}
			return n
		}
	}
	t.Fatalf("%d enqueues went through: Redis is not full", n)
	return n
}
