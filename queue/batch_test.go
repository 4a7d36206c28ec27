package queue

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

// claimMany enqueues n jobs on the default queue and claims them all, proto.MaxBatch at a time.
func claimMany(t *testing.T, c *Client, n int, lease time.Duration) []*Job {
	t.Helper()
	batch := make([]BatchJob, n)
	for i := range batch {
		batch[i] = BatchJob{Type: "a"}
	}
	if _, err := c.EnqueueBatch(ctx, batch); err != nil {
		t.Fatalf("EnqueueBatch(%d) err = %v", n, err)
	}
	var jobs []*Job
	for len(jobs) < n {
		got, err := c.broker().Claim(ctx, "default", n-len(jobs), lease, "w")
		if err != nil || len(got) == 0 {
			t.Fatalf("Claim() = %d jobs, %v after %d claimed; want more", len(got), err, len(jobs))
		}
		if len(got) > proto.MaxBatch {
			t.Fatalf("Claim() = %d jobs, want at most proto.MaxBatch (%d)", len(got), proto.MaxBatch)
		}
		jobs = append(jobs, got...)
	}
	return jobs
}

// One Heartbeat renews any number of leases: a batch past what one script can unpack is
// split, and no job leaves active on the way (a half-run script used to ZREM them all
// and fail at the ZADD).
func TestHeartbeatRenewsMoreThanMaxBatch(t *testing.T) {
	c := setup(t, Config{})
	const n = 5000
	jobs := claimMany(t, c, n, 10*time.Second)
	before := time.Now()
	lost, cancelled, err := c.broker().Heartbeat(ctx, "default", time.Hour, jobs)
	if err != nil || len(lost) != 0 || len(cancelled) != 0 {
		t.Fatalf("Heartbeat(%d jobs) = %d lost, %d cancelled, %v; want none, nil", n, len(lost), len(cancelled), err)
	}
	qk := c.keys.queue("default")
	if got := c.rdb.ZCard(ctx, qk.active).Val(); got != n {
		t.Fatalf("active has %d jobs after the heartbeat, want %d", got, n)
	}
	first := c.rdb.ZRangeWithScores(ctx, qk.active, 0, 0).Val()
	if len(first) != 1 || time.UnixMilli(int64(first[0].Score)).Before(before.Add(59*time.Minute)) {
		t.Errorf("earliest lease deadline = %v, want every lease renewed to ~1h from now", first)
	}
	// A stale token among many is reported lost, the others renewed.
	stale := *jobs[4321]
	stale.Lease += "x"
	jobs[4321] = &stale
	lost, _, err = c.broker().Heartbeat(ctx, "default", time.Hour, jobs)
	if err != nil || len(lost) != 1 || lost[0] != stale.Lease {
		t.Errorf("Heartbeat(one stale of %d) lost = %v, %v; want [%s]", n, lost, err, stale.Lease)
	}
}

// Acks of any number of jobs go through: concurrent Acks are coalesced into calls of at
// most proto.MaxBatch jobs, and AckClaim refuses more than proto.MaxBatch before sending anything.
func TestAckMoreThanMaxBatch(t *testing.T) {
	c := setup(t, Config{})
	const n = 5000
	jobs := claimMany(t, c, n, time.Hour)
	qk := c.keys.queue("default")

	fin := make([]Finished, n/2)
	for i := range fin {
		fin[i] = Finished{Job: jobs[i], Result: []byte("ok")}
	}
	if _, _, err := c.broker().ackFinished(ctx, "default", fin, 0, time.Minute, "w"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AckClaim(%d finished) err = %v, want ErrInvalid", len(fin), err)
	}
	if got := c.rdb.ZCard(ctx, qk.active).Val(); got != n {
		t.Fatalf("active has %d jobs after a refused AckClaim, want %d", got, n)
	}
	for start := 0; start < len(fin); start += proto.MaxBatch {
		chunk := fin[start:min(start+proto.MaxBatch, len(fin))]
		acked, _, err := c.broker().ackFinished(ctx, "default", chunk, 0, time.Minute, "w")
		if err != nil || len(acked) != len(chunk) {
			t.Fatalf("AckClaim(%d finished) = %d acks, %v", len(chunk), len(acked), err)
		}
		for i, e := range acked {
			if e != nil {
				t.Fatalf("AckClaim() acked[%d] = %v, want nil", i, e)
			}
		}
	}

	var wg sync.WaitGroup
	errs := make([]error, n-len(fin))
	for i, j := range jobs[len(fin):] {
		wg.Go(func() { errs[i] = c.broker().Ack(ctx, j, []byte("ok")) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Ack(job %d) err = %v, want nil", len(fin)+i, err)
		}
	}
	if got := c.rdb.ZCard(ctx, qk.active).Val(); got != 0 {
		t.Errorf("active has %d jobs after acking all, want 0", got)
	}
	if got := c.rdb.ZCard(ctx, qk.done).Val(); got != n {
		t.Errorf("done has %d jobs, want %d", got, n)
	}
}
