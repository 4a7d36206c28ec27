package worker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// An idle worker of 500 queues looks at each of them unasked (reap, promote, a claim after
// a wait no token ended) every 5s or so, not every second: about 300 script calls a second
// in all (it made 1,500). And it still runs a job enqueued on
// any of them at once, on its wake token.
func TestIdleWorkerOfManyQueuesCallsLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for 8s")
	}
	t.Parallel()
	srv := redistest.Own(t)
	c, _ := clientWithPrefix(t, srv.Client(t))
	const n = 500
	queues := map[string]int{}
	for i := range n {
		queues[fmt.Sprintf("q%d", i)] = 1
	}
	started := make(chan string, 1)
	var ran atomic.Int64
	startWorker(t, c, Config{Queues: queues, Logger: quiet, Handler: HandlerFunc(func(_ context.Context, j *queue.Job) error {
		ran.Add(1)
		started <- j.Queue
		return nil
	})})
	time.Sleep(1500 * time.Millisecond) // its first look at every queue
	before := totalCalls(t, srv.Client(t))
	const window = 6 * time.Second // more than one recheck (5s +- 1.25s)
	time.Sleep(window)
	calls := totalCalls(t, srv.Client(t)) - before
	if perS := float64(calls) / window.Seconds(); perS > 450 {
		t.Errorf("idle worker of %d queues made %.0f calls a second (scripts and waits), want about 300 at most", n, perS)
	} else {
		t.Logf("FIGURES idle worker of %d queues: %.0f calls a second (scripts and waits)", n, perS)
	}
	sent := time.Now()
	enqueue(t, c, "t", "", queue.On("q321"))
	select {
	case q := <-started:
		if q != "q321" {
			t.Errorf("ran a job of %s, want q321", q)
		}
		// At once on its wake token; or, when its queue was being claimed (a recheck) as the
		// worker's wait began, that wait left it out, and the next one (within a second)
		// takes the token: a loaded machine met that.
		if took := time.Since(sent); took > 2500*time.Millisecond {
			t.Errorf("job on one of %d idle queues started after %v, want within a wait (1s) and a claim", n, took)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("job on one of %d idle queues did not start within 5s", n)
	}
}

// On a cluster, a worker of 300 queues blocks one connection per queue: on connections of
// its own, not its client's pool (2 per node here), which stays free for the claims, acks
// and promotes. On the shared pool its calls waited for a connection the BLPOPs held, and
// a job did not start within 30 s (BENCHMARKS.md, 1,000 queues on a cluster).
func TestClusterWorkerOfManyQueues(t *testing.T) {
	if !redistest.ClusterMode() {
		t.Skip("runs on a Redis Cluster: JOBS_TEST_CLUSTER=1 (make test runs it)")
	}
	t.Parallel()
	rdb := redistest.ClusterClientWithPool(t, 2)
	c, err := queue.NewClient(rdb, queue.Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	queues := map[string]int{}
	for i := range n {
		queues[fmt.Sprintf("q%d", i)] = 1
	}
	started := make(chan string, 64)
	startWorker(t, c, Config{Queues: queues, Logger: quiet, Handler: HandlerFunc(func(_ context.Context, j *queue.Job) error {
		started <- j.Queue
		return nil
	})})
	time.Sleep(1500 * time.Millisecond) // its first look at every queue: it waits on all of them
	for _, q := range []string{"q7", "q150", "q299"} {
		sent := time.Now()
		enqueue(t, c, "t", "", queue.On(q))
		select {
		case got := <-started:
			if got != q {
				t.Errorf("ran a job of %s, want %s", got, q)
			}
			// At once on its wake token, or within the next wait (see above).
			if took := time.Since(sent); took > 2500*time.Millisecond {
				t.Errorf("job on %s started after %v, want within a wait (1s) and a claim", q, took)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("job on one of %d idle queues of a cluster did not start within 10s", n)
		}
	}
}

func TestRecheckEvery(t *testing.T) {
	for _, tc := range []struct {
		queues int
		want   time.Duration
	}{{0, time.Second}, {1, time.Second}, {100, time.Second}, {101, 1010 * time.Millisecond}, {1000, 10 * time.Second}} {
		if got := recheckEvery(tc.queues); got != tc.want {
			t.Errorf("recheckEvery(%d) = %v, want %v", tc.queues, got, tc.want)
		}
	}
}
