package worker

// The seams between the loop and its Redis calls: a slow, hung or failed call must never
// hold the loop, cost a lease, or start a job whose lease may be gone. Each test failed on
// the first one-owner loop.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// proxiedClient is a queue client whose connections go through a proxy to the shared
// server, and a direct client on the same prefix to look at what happened.
func proxiedClient(t *testing.T, opts redis.Options) (c, direct *queue.Client, p *redistest.Proxy) {
	t.Helper()
	srv := redistest.Shared(t)
	p = redistest.NewProxy(t, srv.Addr)
	opts.Addr = p.Addr()
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { rdb.Close() })
	prefix := redistest.Prefix(t)
	c, err := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	direct, err = queue.NewClient(srv.Client(t), queue.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return c, direct, p
}

// One heartbeat that hangs (its reply never comes in time) costs nothing: it gives up
// before the next beat is due, and that beat renews the lease before the watchdog's time.
func TestOneHungHeartbeatDoesNotCancelTheHandler(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("proxies a single server")
	}
	t.Parallel()
	c, direct, p := proxiedClient(t, redis.Options{ContextTimeoutEnabled: true, MaxRetries: -1})
	const lease = 2400 * time.Millisecond // beats at 800ms, watchdog at 2s after a renewal
	cause := make(chan error, 1)
	started := make(chan struct{})
	startWorker(t, c, Config{Lease: lease, Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		close(started)
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
			return ctx.Err()
		case <-time.After(3 * time.Second):
			cause <- nil
			return nil
		}
	})})
	id := enqueue(t, direct, "long", "")
	<-started
	// The next request that names the job is the heartbeat due 800ms after the claim.
	time.Sleep(400 * time.Millisecond)
	p.HoldReply([]byte(id), 10*time.Second)
	select {
	case err := <-cause:
		if err != nil {
			t.Fatalf("handler cancelled: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not end")
	}
	waitState(t, direct, queue.DefaultQueue, id, queue.StateDone, 5*time.Second)
}

// A wake token the worker cannot use is passed on without holding the loop: a Redis call
// that hangs there must not keep a stopping worker from recording its running job's
// outcome and returning.
func TestPassingOnAWakeTokenNeverHoldsTheLoop(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("proxies a single server")
	}
	t.Parallel()
	c, direct, p := proxiedClient(t, redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -1, MaxRetries: -1})
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	w, err := New(c, Config{Concurrency: 2, ShutdownTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, nil)), Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			started <- struct{}{}
			<-release
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	first := enqueue(t, direct, "x", "")
	<-started
	time.Sleep(200 * time.Millisecond) // the queue is empty: a wait is in flight for the free slot
	p.HoldReply([]byte("ltrim"), time.Minute)
	cancel() // stopping: the next wake token is passed on
	second := enqueue(t, direct, "x", "")
	time.Sleep(200 * time.Millisecond) // the token is popped and passed on (and hangs)
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run() err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of the last handler's return")
	}
	waitState(t, direct, queue.DefaultQueue, first, queue.StateDone, time.Second)
	waitState(t, direct, queue.DefaultQueue, second, queue.StateReady, time.Second)
}

// A call that records a failed attempt and fails itself (the connection dropped before
// Redis saw it) is sent again at once, not left to the lease's expiry.
func TestFailedOutcomeCallIsRetried(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("proxies a single server")
	}
	t.Parallel()
	c, direct, p := proxiedClient(t, redis.Options{MaxRetries: -1})
	reason := fmt.Sprintf("boom-%d", time.Now().UnixNano())
	p.CutBeforeRequest([]byte(reason))
	var mu sync.Mutex
	attempts := 0
	startWorker(t, c, Config{Lease: 10 * time.Second, Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		defer mu.Unlock()
		if attempts++; attempts == 1 {
			return errors.New(reason)
		}
		return nil
	})})
	id := enqueue(t, direct, "x", "")
	j := waitState(t, direct, queue.DefaultQueue, id, queue.StateDone, 3*time.Second)
	if p.CutCount() != 1 {
		t.Errorf("proxy cut %d calls, want 1 (the first Fail)", p.CutCount())
	}
	if j.Attempt != 2 || j.LastError != reason {
		t.Errorf("attempt %d, error %q; want attempt 2 after %q", j.Attempt, j.LastError, reason)
	}
}

// A claim reply that comes back late (here after the lease) brings jobs whose leases may
// have been taken over: they are handed back, never run beside the worker that took them.
func TestLateClaimReplyIsHandedBackNotRun(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("proxies a single server")
	}
	t.Parallel()
	c, direct, p := proxiedClient(t, redis.Options{ReadTimeout: -1, MaxRetries: -1})
	const lease = time.Second
	var mu sync.Mutex
	ran := map[string][]string{}
	handler := func(worker string) Handler {
		return HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			mu.Lock()
			ran[j.ID] = append(ran[j.ID], worker)
			mu.Unlock()
			return nil
		})
	}
	startWorker(t, c, Config{ID: "slow-" + t.Name(), Lease: lease, Handler: handler("slow")})
	time.Sleep(200 * time.Millisecond) // idle: waiting for a wake token
	p.HoldReply([]byte("slow-"+t.Name()), 1500*time.Millisecond)
	var ids []string
	for range 3 {
		ids = append(ids, enqueue(t, direct, "x", ""))
	}
	time.Sleep(100 * time.Millisecond) // the slow worker's claim is in flight
	startWorker(t, direct, Config{ID: "fast", Lease: lease, Handler: handler("fast")})
	for _, id := range ids {
		waitState(t, direct, queue.DefaultQueue, id, queue.StateDone, 5*time.Second)
	}
	time.Sleep(1 * time.Second) // past the slow reply
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if len(ran[id]) != 1 {
			t.Errorf("job %s ran on %v, want once", id, ran[id])
		}
	}
}

// A wake token for a job scheduled while a promotion is in flight is not lost to that
// promotion's reply, which planned its next run before the job existed: the job is
// promoted as soon as the reply comes, not a whole wait later.
func TestScheduledWakeDuringPromotionIsKept(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("proxies a single server")
	}
	t.Parallel()
	c, direct, p := proxiedClient(t, redis.Options{MaxRetries: -1})
	startedAt := make(chan time.Time, 1)
	// The worker's first promotion, as it starts, is held 800ms (its script loaded first,
	// so that it runs in Redis at once: only its reply waits).
	if _, _, err := broker.Of(direct).Promote(ctx, queue.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	p.HoldReply([]byte("}:scheduled"), 800*time.Millisecond)
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		startedAt <- time.Now()
		return nil
	})})
	time.Sleep(200 * time.Millisecond) // idle: waiting for a wake token
	due := time.Now().Add(100 * time.Millisecond)
	enqueue(t, direct, "x", "", queue.At(due))
	select {
	case at := <-startedAt:
		// The held reply comes about 500ms after the job is due; the next planned
		// promotion would be a second after that.
		t.Logf("started %s after due", at.Sub(due))
		if late := at.Sub(due); late > time.Second {
			t.Errorf("job started %s after it was due", late)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("job did not start")
	}
}

// The log line of a failed attempt shows the last line of a multi-line error (an exec
// handler's stderr tail ends with the program's own message), as `jobs ls` does; it used
// to show the first.
func TestFailedJobLogShowsLastLineOfError(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	logger, lc := countingLogger(t, `error="error: disk full"`)
	startWorker(t, c, Config{Logger: logger, Queues: map[string]int{"default": 1},
		Handler: HandlerFunc(func(context.Context, *queue.Job) error {
			return SkipRetry(errors.New("exit status 1\nstderr:\nwarming up\nerror: disk full"))
		})})
	id, err := c.Enqueue(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "default", id, queue.StateDead, 5*time.Second)
	// The record is written when the loop takes the fail call's reply: just after the
	// job is dead in Redis.
	for deadline := time.Now().Add(5 * time.Second); lc.n.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no log record shows the error's last line")
		}
	}
}

// Queue weights are bounded: two weights near MaxInt64 overflowed the total and panicked
// the worker's first claim.
func TestQueueWeightsBounded(t *testing.T) {
	c := newClient(t)
	for _, qs := range []map[string]int{
		{"a": math.MaxInt64, "b": math.MaxInt64},
		{"a": MaxWeight + 1},
		{"a": 0},
	} {
		if _, err := New(c, Config{Handler: HandlerFunc(noop), Queues: qs}); err == nil ||
			!strings.Contains(err.Error(), "weight") {
			t.Errorf("New(Queues: %v) err = %v, want a weight error", qs, err)
		}
	}
	if _, err := New(c, Config{Handler: HandlerFunc(noop), Queues: map[string]int{"a": MaxWeight, "b": 1}}); err != nil {
		t.Errorf("New(weights %d and 1) = %v", MaxWeight, err)
	}
}
