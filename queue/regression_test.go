package queue

import (
	"errors"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/scripts"
)

// A stale done-set entry (its hash expired) must not delete a new job that reuses the ID.
func TestTrimSparesANewJobReusingAnID(t *testing.T) {
	c := setup(t, Config{DoneRetention: 200 * time.Millisecond})
	mustEnqueue(t, c, "a", ID("reused"))
	c.Ack(ctx, claimOne(t, c, "default", time.Minute, "w"), nil)
	eventually(t, 2*time.Second, "done hash expired", func() bool {
		return c.rdb.Exists(ctx, c.keys.queue("default").job("reused")).Val() == 0
	})
	mustEnqueue(t, c, "a", ID("reused"), Delay(time.Hour)) // the set still lists the old one
	mustEnqueue(t, c, "b")
	c.Ack(ctx, claimOne(t, c, "default", time.Minute, "w"), nil) // trims the stale entry
	if j, err := c.Get(ctx, "default", "reused"); err != nil || j.State != StateScheduled {
		t.Fatalf("new job with a reused ID after a trim: %+v, %v; want it scheduled", j, err)
	}
	if n, _ := c.Purge(ctx, "default", StateDone); n != 1 {
		t.Errorf("Purge(done) = %d, want 1 (the b job)", n)
	}
	if _, err := c.Get(ctx, "default", "reused"); err != nil {
		t.Errorf("purging done deleted a scheduled job: %v", err)
	}
}

// A Job read by Get holds no lease and must not pass the fencing check.
func TestEmptyLeaseIsRefused(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "a")
	c.Ack(ctx, claimOne(t, c, "default", time.Minute, "w"), nil)
	j, _ := c.Get(ctx, "default", id)
	if _, err := c.Fail(ctx, j, "x", 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Fail(job from Get) err = %v, want ErrLeaseLost", err)
	}
	if err := c.Ack(ctx, j, nil); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Ack(job from Get) err = %v, want ErrLeaseLost", err)
	}
	if err := c.HandBack(ctx, j, 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("HandBack(job from Get) err = %v, want ErrLeaseLost", err)
	}
	// The scripts refuse an empty token too, whatever the Go side does.
	qk := c.keys.queue("default")
	res, err := c.run(ctx, scripts.Fail, []string{qk.active, qk.retry, qk.dead, qk.wake},
		qk.jobPrefix, qk.stats, 1000, 10, id, "", "x", 0).StringSlice()
	if err != nil || len(res) != 1 || res[0] != "lost" {
		t.Errorf("fail.lua with an empty token = %v, %v; want lost", res, err)
	}
	if got, _ := c.Get(ctx, "default", id); got.State != StateDone {
		t.Errorf("done job is now %s", got.State)
	}
}

// One queue's failing script call must not be reported for another queue's jobs.
func TestBatchReportsErrorsPerQueue(t *testing.T) {
	c := setup(t, Config{})
	c.rdb.Set(ctx, c.keys.queue("broken").ready, "not a list", 0) // LPUSH there fails
	res, err := c.EnqueueBatch(ctx, []BatchJob{
		{Type: "a", Options: []Option{On("fine")}},
		{Type: "a", Options: []Option{On("broken")}},
	})
	if err != nil {
		t.Fatalf("EnqueueBatch() err = %v, want per-job errors", err)
	}
	if res[0].Err != nil || res[1].Err == nil {
		t.Fatalf("results = %+v; want the fine queue's job enqueued, the broken one's failed", res)
	}
	if _, err := c.Get(ctx, "fine", res[0].ID); err != nil {
		t.Errorf("fine job not readable: %v", err)
	}
	if keys := c.rdb.Keys(ctx, c.cfg.Prefix+":{broken}:job:*").Val(); len(keys) != 0 {
		t.Errorf("failed enqueue left %d job hashes in no list", len(keys))
	}
}

// A stale copy of an ID in ready (a command resent after a lost reply can leave one) must
// not claim the job a second time, neither while it runs nor after it is done.
func TestClaimSkipsAStaleReadyEntry(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "a")
	qk := c.keys.queue("default")
	c.rdb.LPush(ctx, qk.ready, id) // the stale copy, claimed after the real entry
	running := claimOne(t, c, "default", time.Minute, "w1")
	if again, err := c.Claim(ctx, "default", 10, time.Minute, "w2"); err != nil || len(again) != 0 {
		t.Fatalf("second claim of a running job = %d jobs, %v; want none", len(again), err)
	}
	if err := c.Ack(ctx, running, nil); err != nil {
		t.Fatalf("Ack of the only run: %v", err)
	}
	c.rdb.LPush(ctx, qk.ready, id)
	if again, _ := c.Claim(ctx, "default", 10, time.Minute, "w2"); len(again) != 0 {
		t.Fatalf("a done job was claimed again")
	}
	if j, _ := c.Get(ctx, "default", id); j.State != StateDone || j.Attempt != 1 {
		t.Errorf("job after stale entries = %s attempt %d, want done attempt 1", j.State, j.Attempt)
	}
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 0 {
		t.Errorf("ready still holds %d stale entries, want them dropped", n)
	}
}
