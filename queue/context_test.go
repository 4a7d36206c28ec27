package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// proxied returns a Client whose Redis connection goes through a proxy the test can stall.
func proxied(t *testing.T) (*Client, *redistest.Proxy) {
	t.Helper()
	t.Parallel()
	p := redistest.NewProxy(t, redistest.Shared(t).Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c, err := NewClient(rdb, Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, "warm", nil, On("warm")); err != nil { // loads the scripts
		t.Fatal(err)
	}
	return c, p
}

// A context done before the call used to enqueue all the same and return nil.
func TestEnqueueWithDoneContextWritesNothing(t *testing.T) {
	c := setup(t, Config{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if id, err := c.Enqueue(cctx, "a", nil); !errors.Is(err, context.Canceled) || errors.Is(err, ErrUncertain) {
		t.Errorf("Enqueue(cancelled ctx) = %q, %v; want context.Canceled, not ErrUncertain", id, err)
	}
	if res, err := c.EnqueueBatch(cctx, []BatchJob{{Type: "a"}}); res != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("EnqueueBatch(cancelled ctx) = %v, %v; want nil, context.Canceled", res, err)
	}
	if n := c.rdb.LLen(ctx, c.keys.queue("default").ready).Val(); n != 0 {
		t.Errorf("ready holds %d jobs after enqueues with a cancelled ctx, want 0", n)
	}
	id := mustEnqueue(t, c, "a")
	j := claimOne(t, c, "default", time.Minute, "w")
	if err := c.broker().Ack(cctx, j, nil); !errors.Is(err, context.Canceled) || errors.Is(err, ErrUncertain) {
		t.Errorf("Ack(cancelled ctx) = %v; want context.Canceled", err)
	}
	if got, _ := c.Get(ctx, "default", id); got.State != StateActive {
		t.Errorf("job after an Ack with a cancelled ctx is %s, want still active", got.State)
	}
}

// A 200ms deadline used to block for the Redis client's read timeout (seconds), and
// callers whose jobs were written got a plain "deadline exceeded". Now every caller
// returns by its deadline, with ctx's plain error only when its job was never sent, and
// ErrUncertain (wrapping the deadline) when it was.
func TestEnqueueHonoursDeadlineAndSaysWhenUncertain(t *testing.T) {
	c, p := proxied(t)
	p.Stall()
	const n = 200
	type outcome struct {
		id  string
		err error
		in  time.Duration
	}
	out := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			id, err := c.Enqueue(dctx, "a", nil, ID(fmt.Sprintf("job-%d", i)))
			out[i] = outcome{id, err, time.Since(start)}
		})
	}
	wg.Wait()
	p.Resume()
	uncertain := 0
	for i, o := range out {
		if o.in > time.Second {
			t.Errorf("Enqueue() %d with a 200ms deadline returned after %v", i, o.in)
		}
		if !errors.Is(o.err, context.DeadlineExceeded) {
			t.Fatalf("Enqueue() %d on a stalled Redis = %q, %v; want an error wrapping the deadline", i, o.id, o.err)
		}
		if errors.Is(o.err, ErrUncertain) {
			uncertain++
			if o.id != fmt.Sprintf("job-%d", i) {
				t.Errorf("uncertain Enqueue() %d returned ID %q, want the job's", i, o.id)
			}
		}
	}
	if uncertain == 0 {
		t.Errorf("no Enqueue() of %d on a stalled Redis was uncertain; the ones sent must be", n)
	}
	// Let what the stalled proxy held reach Redis, then check every certain answer.
	time.Sleep(300 * time.Millisecond)
	for i, o := range out {
		if errors.Is(o.err, ErrUncertain) {
			continue
		}
		if _, err := c.Get(ctx, "default", fmt.Sprintf("job-%d", i)); !errors.Is(err, ErrNotFound) {
			t.Errorf("job-%d exists though Enqueue() said it was not sent (%v)", i, o.err)
		}
	}
	t.Logf("%d of %d uncertain", uncertain, n)
}

// Ack with a deadline on a stalled Redis returns by it, saying the ack is uncertain.
func TestAckHonoursDeadline(t *testing.T) {
	c, p := proxied(t)
	id := mustEnqueue(t, c, "a")
	j := claimOne(t, c, "default", time.Minute, "w")
	p.Stall()
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.broker().Ack(dctx, j, nil)
	if took := time.Since(start); took > time.Second || !errors.Is(err, ErrUncertain) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ack() on a stalled Redis = %v after %v; want ErrUncertain and the deadline within ~200ms", err, took)
	}
	p.Resume()
	// Repeating an uncertain ack is safe.
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Errorf("Ack() again = %v, want nil", err)
	}
	if got, _ := c.Get(ctx, "default", id); got.State != StateDone {
		t.Errorf("job is %s, want done", got.State)
	}
}

// The SADD that registers a new queue name used to fail the enqueue of a job it wrote.
func TestFailedQueueRegistrationFailsNoWrittenJob(t *testing.T) {
	c := setup(t, Config{})
	c.rdb.Set(ctx, c.keys.queues(), "not a set", 0) // SADD there fails with WRONGTYPE
	id, err := c.Enqueue(ctx, "a", nil, On("fresh"))
	if err != nil {
		t.Fatalf("Enqueue() on a new queue with the registration failing = %q, %v; want the job enqueued", id, err)
	}
	if _, err := c.Get(ctx, "fresh", id); err != nil {
		t.Errorf("Get() of the enqueued job: %v", err)
	}
	res, err := c.EnqueueBatch(ctx, []BatchJob{{Type: "a", Options: []Option{On("fresh2")}}})
	if err != nil || res[0].Err != nil {
		t.Errorf("EnqueueBatch() on a new queue with the registration failing = %+v, %v; want it enqueued", res, err)
	}
	// Once the key is fixed, the next enqueue registers the queue.
	c.rdb.Del(ctx, c.keys.queues())
	mustEnqueue(t, c, "a", On("fresh"))
	if qs, _ := c.Queues(ctx); strings.Join(qs, ",") != "fresh" {
		t.Errorf("Queues() = %v, want [fresh] registered by the next enqueue", qs)
	}
}

// A deadline passing while a large batch was being written used to return (nil, err),
// though thousands of its jobs were written. Now every job's outcome is in its result:
// enqueued jobs exist, failed ones do not, uncertain ones may.
func TestBatchDeadlineReportsEveryJob(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c, err := NewClient(rdb, Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, c, "warm") // loads the scripts, registers the queue
	batch := make([]BatchJob, 50000)
	for i := range batch {
		batch[i] = BatchJob{Type: "a", Payload: []byte("p")}
	}
	// Preparing 50,000 jobs takes a while on a busy machine: widen the deadline until it
	// passes during the write. A deadline that passes before anything is sent must write
	// nothing (nil results).
	qk := c.keys.queue("default")
	var res []BatchResult
	var err2 error
	for d := 30 * time.Millisecond; res == nil && d < 5*time.Second; d *= 2 {
		before := c.rdb.LLen(ctx, qk.ready).Val()
		dctx, cancel := context.WithTimeout(ctx, d)
		res, err2 = c.EnqueueBatch(dctx, batch)
		cancel()
		if res == nil {
			time.Sleep(100 * time.Millisecond)
			if after := c.rdb.LLen(ctx, qk.ready).Val(); after != before {
				t.Fatalf("EnqueueBatch() with a %v deadline = nil results, %v; but %d of its jobs were written", d, err2, after-before)
			}
		}
	}
	err = err2
	if len(res) != len(batch) {
		t.Fatalf("EnqueueBatch() with a deadline passing = %d results, %v; want one per job", len(res), err)
	}
	if err == nil {
		t.Skip("no deadline passed during the write on this machine")
	}
	var be *BatchError
	if !errors.As(err, &be) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUncertain) {
		t.Fatalf("EnqueueBatch() err = %v; want a *BatchError wrapping ErrUncertain and the deadline", err)
	}
	time.Sleep(100 * time.Millisecond) // what was sent has run
	written, uncertain := 0, len(be.Uncertain)
	for i, r := range res {
		exists := c.rdb.Exists(ctx, c.keys.queue("default").job(r.ID)).Val() == 1
		switch {
		case r.Err == nil && !exists:
			t.Fatalf("job %d reported enqueued is not in Redis", i)
		case r.Err != nil && !errors.Is(r.Err, ErrUncertain) && exists:
			t.Fatalf("job %d reported failed (%v) is in Redis", i, r.Err)
		case r.Err == nil:
			written++
		}
	}
	t.Logf("%d enqueued, %d uncertain, %d failed", written, uncertain, len(be.Failed))
}
