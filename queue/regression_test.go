package queue

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/scripts"
)

// A stale done-set entry (its hash expired) must not delete a new job that reuses the ID.
func TestTrimSparesANewJobReusingAnID(t *testing.T) {
	c := setup(t, Config{DoneRetention: 200 * time.Millisecond})
	mustEnqueue(t, c, "a", ID("reused"))
	c.broker().Ack(ctx, claimOne(t, c, "default", time.Minute, "w"), nil)
	eventually(t, 2*time.Second, "done hash expired", func() bool {
		return c.rdb.Exists(ctx, c.keys.queue("default").job("reused")).Val() == 0
	})
	mustEnqueue(t, c, "a", ID("reused"), Delay(time.Hour)) // the set still lists the old one
	mustEnqueue(t, c, "b")
	c.broker().Ack(ctx, claimOne(t, c, "default", time.Minute, "w"), nil) // trims the stale entry
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
	c.broker().Ack(ctx, claimOne(t, c, "default", time.Minute, "w"), nil)
	j, _ := c.Get(ctx, "default", id)
	if _, err := c.broker().Fail(ctx, j, "x", 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Fail(job from Get) err = %v, want ErrLeaseLost", err)
	}
	if err := c.broker().Ack(ctx, j, nil); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Ack(job from Get) err = %v, want ErrLeaseLost", err)
	}
	if err := c.broker().HandBack(ctx, j, 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("HandBack(job from Get) err = %v, want ErrLeaseLost", err)
	}
	// The scripts refuse an empty token too, whatever the Go side does.
	qk := c.keys.queue("default")
	res, err := c.run(ctx, scripts.Fail, []string{qk.active, qk.retry, qk.dead, qk.wake, qk.events},
		qk.jobPrefix, qk.stats, 1000, 10, 0, id, "", "x", 0, "x").StringSlice()
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
	var be *BatchError
	if !errors.As(err, &be) || !slices.Equal(be.Failed, []int{1}) || len(be.Uncertain) != 0 {
		t.Fatalf("EnqueueBatch() err = %v, want a *BatchError with job 1 failed", err)
	}
	if res[0].Err != nil || res[1].Err == nil || errors.Is(res[1].Err, ErrUncertain) {
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
	if again, err := c.broker().Claim(ctx, "default", 10, time.Minute, "w2"); err != nil || len(again) != 0 {
		t.Fatalf("second claim of a running job = %d jobs, %v; want none", len(again), err)
	}
	if err := c.broker().Ack(ctx, running, nil); err != nil {
		t.Fatalf("Ack of the only run: %v", err)
	}
	c.rdb.LPush(ctx, qk.ready, id)
	if again, _ := c.broker().Claim(ctx, "default", 10, time.Minute, "w2"); len(again) != 0 {
		t.Fatalf("a done job was claimed again")
	}
	if j, _ := c.Get(ctx, "default", id); j.State != StateDone || j.Attempt != 1 {
		t.Errorf("job after stale entries = %s attempt %d, want done attempt 1", j.State, j.Attempt)
	}
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 0 {
		t.Errorf("ready still holds %d stale entries, want them dropped", n)
	}
}

// go-redis resends a command whose reply was lost (a connection cut after the write), so
// enqueue.lua can run twice with the same generated IDs. The second run must neither
// overwrite the job, which may already be running, nor queue it again, and must report
// it enqueued: it is the caller's own job.
func TestResentEnqueueChangesNothing(t *testing.T) {
	c := setup(t, Config{})
	job, err := c.prepare(BatchJob{Type: "a", Payload: []byte("p")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	later, err := c.prepare(BatchJob{Type: "a", Options: []Option{Delay(time.Hour)}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sendPrepared(c, []prepared{job, later}); err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("first send = %+v, %v", res, err)
	}
	claimed := claimOne(t, c, "default", time.Minute, "w")
	res, err := sendPrepared(c, []prepared{job, later})
	if err != nil || res[0] != (BatchResult{ID: job.id}) || res[1] != (BatchResult{ID: later.id}) {
		t.Fatalf("resend = %+v, %v; want both reported enqueued under their IDs", res, err)
	}
	if j, _ := c.Get(ctx, "default", job.id); j.State != StateActive || j.Attempt != 1 {
		t.Errorf("after the resend the claimed job is %s, attempt %d; want active, 1", j.State, j.Attempt)
	}
	qk := c.keys.queue("default")
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 0 {
		t.Errorf("ready has %d IDs after the resend, want 0", n)
	}
	if n := c.rdb.ZCard(ctx, qk.scheduled).Val(); n != 1 {
		t.Errorf("scheduled has %d IDs after the resend, want 1", n)
	}
	if err := c.broker().Ack(ctx, claimed, nil); err != nil {
		t.Errorf("Ack() after the resend err = %v; the lease must be untouched", err)
	}

	// A call of one job (a single Enqueue) takes a shorter path through the script.
	for _, opts := range [][]Option{nil, {Delay(time.Hour)}} {
		one, err := c.prepare(BatchJob{Type: "a", Options: opts}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for send := range 2 {
			if res, err := sendPrepared(c, []prepared{one}); err != nil || res[0] != (BatchResult{ID: one.id}) {
				t.Fatalf("send %d of one job %v = %+v, %v; want it enqueued", send, opts, res, err)
			}
		}
		if opts == nil {
			claimOne(t, c, "default", time.Minute, "w")
		}
	}
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 0 {
		t.Errorf("ready has %d IDs after one job sent twice and claimed, want 0", n)
	}
	if n := c.rdb.ZCard(ctx, qk.scheduled).Val(); n != 2 {
		t.Errorf("scheduled has %d IDs after a delayed job sent twice, want 2 (with the first test's)", n)
	}
}

// Redis does not roll back a script that fails midway: a wrong-typed list or set of the
// queue must be met before any job hash, list entry or wake token is written.
func TestEnqueueIntoWrongTypedKeysWritesNothing(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	for _, tc := range []struct {
		name string
		key  string
		opts []Option
	}{
		{"ready", qk.ready, nil},
		{"scheduled", qk.scheduled, []Option{Delay(time.Hour)}},
		{"wake, ready job", qk.wake, nil},
		{"wake, scheduled job", qk.wake, []Option{Delay(time.Hour)}},
		{"events", qk.events, nil},
	} {
		c.rdb.Del(ctx, qk.ready, qk.scheduled, qk.wake, qk.events)
		c.rdb.LPush(ctx, qk.ready, "old")
		c.rdb.ZAdd(ctx, qk.scheduled, redis.Z{Score: 1, Member: "old"})
		c.rdb.Set(ctx, tc.key, "not a list or set", 0)
		// Both a due and a delayed job, so the failing key is not the first one written;
		// then the job alone (a call of one job takes a shorter path through the script).
		res, err := c.EnqueueBatch(ctx, []BatchJob{{Type: "a"}, {Type: "a", Options: tc.opts}})
		if err == nil && res[0].Err == nil {
			t.Errorf("%s: EnqueueBatch() = %+v, want a WRONGTYPE error", tc.name, res)
		}
		if _, err := c.Enqueue(ctx, "a", nil, tc.opts...); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("%s: Enqueue() err = %v, want a WRONGTYPE error", tc.name, err)
		}
		if keys := c.rdb.Keys(ctx, qk.jobPrefix+"*").Val(); len(keys) != 0 {
			t.Errorf("%s: failed enqueue left job hashes %v", tc.name, keys)
		}
		if tc.key != qk.ready {
			if got := c.rdb.LRange(ctx, qk.ready, 0, -1).Val(); !slices.Equal(got, []string{"old"}) {
				t.Errorf("%s: ready = %v after a failed enqueue, want [old]", tc.name, got)
			}
		}
		if tc.key != qk.scheduled {
			if got := c.rdb.ZRange(ctx, qk.scheduled, 0, -1).Val(); !slices.Equal(got, []string{"old"}) {
				t.Errorf("%s: scheduled = %v after a failed enqueue, want [old]", tc.name, got)
			}
		}
		if tc.key != qk.wake {
			if n := c.rdb.LLen(ctx, qk.wake).Val(); n != 0 {
				t.Errorf("%s: %d wake tokens after a failed enqueue, want 0", tc.name, n)
			}
		}
	}
}

// One call can hold the same caller-chosen ID twice (a file with a repeated line): the
// second is a duplicate, however the first's settings differ.
func TestBatchWithARepeatedIDWritesItOnce(t *testing.T) {
	c := setup(t, Config{})
	res, err := c.EnqueueBatch(ctx, []BatchJob{
		{Type: "a", Payload: []byte("first"), Options: []Option{ID("x")}},
		{Type: "b", Payload: []byte("second"), Options: []Option{ID("x"), Delay(time.Hour)}},
		{Type: "a", Payload: []byte("third"), Options: []Option{ID("x")}},
	})
	if err != nil || res[0].Err != nil || !errors.Is(res[1].Err, ErrDuplicate) || !errors.Is(res[2].Err, ErrDuplicate) {
		t.Fatalf("EnqueueBatch() = %+v, %v; want the first enqueued, the others duplicates", res, err)
	}
	if j, _ := c.Get(ctx, "default", "x"); string(j.Payload) != "first" || j.State != StateReady {
		t.Errorf("job x = %q, %s; want the first one, ready", j.Payload, j.State)
	}
	if n := c.rdb.LLen(ctx, c.keys.queue("default").ready).Val(); n != 1 {
		t.Errorf("ready has %d IDs, want 1", n)
	}
}

// The same for caller-chosen IDs: the resent call (same arguments, so the same nonce)
// finds its own jobs and reports them enqueued, while any other call with those IDs still
// gets ErrDuplicate.
func TestResentEnqueueKnowsItsOwnIDs(t *testing.T) {
	c := setup(t, Config{})
	var jobs []prepared
	for _, id := range []string{"mine", "mine-later"} {
		var opts []Option
		if id == "mine-later" {
			opts = append(opts, Delay(time.Hour))
		}
		p, err := c.prepare(BatchJob{Type: "a", Options: append(opts, ID(id))}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, p)
	}
	qk := c.keys.queue("default")
	args := c.enqueueArgs(qk, jobs, []int{0, 1})
	keys := []string{qk.ready, qk.scheduled, qk.wake, qk.events}
	for send := 1; send <= 2; send++ {
		reply, err := scripts.Enqueue.Run(ctx, c.rdb, keys, args...).Slice()
		if err != nil || len(reply) != 1 || reply[0] != "11" {
			t.Fatalf("send %d of one call = %v, %v; want both enqueued (\"11\")", send, reply, err)
		}
	}
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 1 {
		t.Errorf("ready has %d IDs after the resend, want 1", n)
	}
	if n := c.rdb.ZCard(ctx, qk.scheduled).Val(); n != 1 {
		t.Errorf("scheduled has %d IDs after the resend, want 1", n)
	}
	res, err := sendPrepared(c, jobs)
	if err != nil || !errors.Is(res[0].Err, ErrDuplicate) || !errors.Is(res[1].Err, ErrDuplicate) {
		t.Errorf("another call with the same IDs = %+v, %v; want ErrDuplicate for both", res, err)
	}
}

// sendPrepared is enqueuePrepared with the error EnqueueBatch would return.
func sendPrepared(c *Client, jobs []prepared) ([]BatchResult, error) {
	res := c.enqueuePrepared(ctx, jobs)
	return res, batchError(res)
}

// A Redis that loses the queues set (restarted without persistence, flushed, failed over
// to a replica that missed the write) gets a queue back from the next enqueue on it once
// the Client's reregister interval has passed since it last added it: a long-lived
// Client (a scheduler, a web app) used to remember the queue as added forever, so jobs ls
// said `no queue "default"` with its jobs in Redis.
func TestQueueRegisteredAgainAfterRedisLostTheSet(t *testing.T) {
	c := setup(t, Config{})
	if _, err := c.Enqueue(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	c.rdb.Del(ctx, c.keys.queues())
	if _, err := c.Enqueue(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if c.rdb.SIsMember(ctx, c.keys.queues(), "default").Val() {
		t.Fatal("the queue was added again within the interval: every enqueue pays an SADD")
	}
	c.reregister = 0 // the interval has passed
	if _, err := c.Enqueue(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if !c.rdb.SIsMember(ctx, c.keys.queues(), "default").Val() {
		t.Fatal("the queue was not added again by an enqueue after the interval")
	}
	if jobs, err := c.List(ctx, "default", StateReady, 0, 10); err != nil || len(jobs) != 3 {
		t.Errorf("List(ready) = %d jobs, %v; want 3", len(jobs), err)
	}
}
