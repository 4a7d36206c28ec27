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
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop) // after the worker's stop, which Cleanup runs first
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
