package worker

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// handClient is a client on a prefix the test knows, for its hand-off keys.
func handClient(t *testing.T) (*queue.Client, redis.UniversalClient, string) {
	t.Helper()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	c, err := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return c, rdb, prefix + ":{default}:"
}

// waitRegistered waits until n workers are registered as waiters of the default queue,
// for a while yet (a registration lasts proto.WaiterFor; an idle worker renews it about
// every proto.MaxWait).
func waitRegistered(t *testing.T, rdb redis.UniversalClient, base string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := strconv.FormatInt(time.Now().Add(300*time.Millisecond).UnixMilli(), 10)
		if got, _ := rdb.ZCount(ctx, base+"waiters", after, "+inf").Result(); got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers never registered for hand-offs", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startCounting is startWorker for a worker that counts the jobs handed to it.
func startCounting(t *testing.T, c *queue.Client, cfg Config) *atomic.Int64 {
	t.Helper()
	w, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	handed := new(atomic.Int64)
	w.trace = func(p tracePoint, _ time.Time) {
		// Through the worker's wait, or through a claim of its that drained its hand list:
		// one sent just as the job was handed (a loaded machine's CI run met that).
		if p == traceHanded || p == traceDrained {
			handed.Add(1)
		}
	}
	runWorker(t, w)
	return handed
}

// An idle worker gets each job handed: it runs once, attempt 1, its lease renewed by the
// heartbeat past the lease's length (the lease began at the hand-off), acked done; and
// the worker registers again for the next one.
func TestHandedJobsRunOnceAndRenew(t *testing.T) {
	t.Parallel()
	c, rdb, base := handClient(t)
	const lease = 3 * time.Second
	var mu sync.Mutex
	runs := map[string][]*queue.Job{}
	handed := startCounting(t, c, Config{Concurrency: 2, Lease: lease, Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		runs[j.ID] = append(runs[j.ID], j)
		mu.Unlock()
		if j.Type == "long" {
			select { // past the lease: the heartbeats must renew it
			case <-time.After(lease + lease/3):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		return nil
	})})
	for i, typ := range []string{"long", "short", "short"} {
		waitRegistered(t, rdb, base, 1)
		id, err := c.Enqueue(ctx, typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		j := waitState(t, c, "default", id, queue.StateDone, 20*time.Second)
		mu.Lock()
		got := runs[id]
		mu.Unlock()
		if len(got) != 1 || got[0].Attempt != 1 || j.Attempt != 1 || handed.Load() != int64(i+1) {
			t.Errorf("%s job %s: runs %+v, in Redis %+v, %d handed; want one handed run, attempt 1",
				typ, id, got, j, handed.Load())
		}
	}
}

// stalledWait is a worker's broker whose waits never pop anything: the worker registers
// for hand-offs (its claims do) but never takes its hand list, as if its BLPOP's
// connection were stopped.
type stalledWait struct{ broker.Broker }

func (stalledWait) WaitHanded(ctx context.Context, _ []string, _ time.Duration, _ *proto.Waiter) (
	string, string, *queue.Job, error) {
	<-ctx.Done()
	return "", "", nil, nil
}

// A waiter that died (registered, never popping its hand list) costs the handed job its
// lease: the reaper of a live worker puts it back, and that worker runs it.
func TestJobHandedToADeadWaiterIsRecovered(t *testing.T) {
	t.Parallel()
	c, rdb, base := handClient(t)
	ran := make(chan *queue.Job, 2)
	handed := startCounting(t, c, Config{Lease: time.Second, Handler: HandlerFunc(func(_ context.Context, j *queue.Job) error {
		ran <- j
		return nil
	})})
	waitRegistered(t, rdb, base, 1)
	// The dead waiter registered last (its registration ends last): the job is its.
	ghost := redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "300\tghost-token\tghost"}
	if err := rdb.ZAdd(ctx, base+"waiters", ghost).Err(); err != nil {
		t.Fatal(err)
	}
	id, err := c.Enqueue(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.LLen(ctx, base+"hand:ghost").Result(); n != 1 {
		t.Fatalf("the job was not handed to the dead waiter")
	}
	select {
	case j := <-ran:
		if j.ID != id || j.Attempt != 2 || handed.Load() != 0 {
			t.Errorf("ran %s attempt %d (%d handed), want %s claimed after the reap, attempt 2", j.ID, j.Attempt, handed.Load(), id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job handed to the dead waiter never ran")
	}
}

// A worker that stops with a job on its hand list (handed while it could not pop it)
// hands it back: ready at once for another worker, and its registration is taken out.
func TestStopHandsBackAHandedJob(t *testing.T) {
	t.Parallel()
	c, rdb, base := handClient(t)
	w, err := New(c, Config{ID: "stalled", Handler: HandlerFunc(func(context.Context, *queue.Job) error {
		t.Error("the stalled worker ran a job")
		return nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	w.broker = stalledWait{w.broker}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer cancel()
	waitRegistered(t, rdb, base, 1)
	id, err := c.Enqueue(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.LLen(ctx, base+"hand:stalled").Result(); n != 1 {
		t.Fatalf("the job was not handed to the stalled worker")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run() err = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	j, err := c.Get(ctx, "default", id)
	if err != nil || j.State != queue.StateReady || j.Attempt != 0 {
		t.Errorf("job after the stop = %+v, %v; want ready, no attempt counted", j, err)
	}
	if n, _ := rdb.Exists(ctx, base+"hand:stalled", base+"waiters").Result(); n != 0 {
		t.Errorf("%d of the hand list and the waiters set left after the stop, want none", n)
	}
}
