package worker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// blockAfterFast returns a handler that runs "fast" jobs at once and holds "block" jobs
// until release is closed (or their context ends), and a channel told when a block job
// starts.
func blockAfterFast() (h Handler, started <-chan string, release chan struct{}) {
	st := make(chan string, 16)
	release = make(chan struct{})
	h = HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		if j.Type != "block" {
			return nil
		}
		st <- j.ID
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return h, st, release
}

// warm runs a few fast jobs so the worker has timed its handlers short and claims ahead.
func warm(t *testing.T, c *queue.Client) {
	t.Helper()
	for range 4 {
		waitState(t, c, "default", enqueue(t, c, "fast", ""), queue.StateDone, 5*time.Second)
	}
}

// enqueueBlockThenFast enqueues, in one batch so one claim takes them together, a job
// that blocks and n fast jobs queued behind it.
func enqueueBlockThenFast(t *testing.T, c *queue.Client, n int) (block string, fast []string) {
	t.Helper()
	batch := []queue.BatchJob{{Type: "block"}}
	for range n {
		batch = append(batch, queue.BatchJob{Type: "fast"})
	}
	res, err := c.EnqueueBatch(ctx, batch)
	if err != nil {
		t.Fatalf("EnqueueBatch() err = %v", err)
	}
	for _, r := range res[1:] {
		fast = append(fast, r.ID)
	}
	return res[0].ID, fast
}

// A job claimed ahead that waits behind a slow one is handed back, uncounted, well before
// its lease would expire: another worker runs it meanwhile, at its first attempt.
func TestBufferedJobsBehindASlowJobAreHandedBack(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	h, started, release := blockAfterFast()
	defer close(release)
	// Lease 1s: a buffered job is handed back after 100ms; had it stayed until its lease
	// expired, the reaper would have counted an attempt.
	startWorker(t, c, Config{Concurrency: 1, Lease: time.Second, Handler: h})
	warm(t, c)
	block, fast := enqueueBlockThenFast(t, c, 5)
	select {
	case id := <-started:
		if id != block {
			t.Fatalf("started %s, want the block job %s", id, block)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the block job never started")
	}
	// The first worker's only slot is held: a second worker must get the fast jobs.
	startWorker(t, c, Config{Concurrency: 5, Lease: time.Second, Handler: h})
	for _, id := range fast {
		if j := waitState(t, c, "default", id, queue.StateDone, 5*time.Second); j.Attempt != 1 {
			t.Errorf("fast job %s done at attempt %d, want 1 (a hand back does not count)", id, j.Attempt)
		}
	}
	if j, err := c.Get(ctx, "default", block); err != nil || j.State != queue.StateActive || j.Attempt != 1 {
		t.Errorf("block job = %+v, %v; want still active at attempt 1", j, err)
	}
}

// On shutdown the jobs claimed ahead are handed back with the running one: every job is
// ready again, no attempt counted.
func TestShutdownHandsBackBufferedJobs(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	h, started, release := blockAfterFast()
	defer close(release)
	// A long lease (staleAfter 500ms) and a shutdown right after the start: the fast jobs
	// are still buffered when the worker stops.
	stop := startWorker(t, c, Config{Concurrency: 1, Lease: time.Minute, ShutdownTimeout: 50 * time.Millisecond, Handler: h})
	warm(t, c)
	block, fast := enqueueBlockThenFast(t, c, 5)
	<-started
	stop()
	for _, id := range append([]string{block}, fast...) {
		j, err := c.Get(ctx, "default", id)
		if err != nil || j.State != queue.StateReady || j.Attempt != 0 {
			t.Errorf("job %s after shutdown = %+v, %v; want ready, attempt 0", id, j, err)
		}
	}
}

// A handler that ignores its context is abandoned Config.AbandonGrace after its timeout:
// the attempt fails, its slot runs the next job, and the worker still stops, while the
// handler's goroutine stays blocked.
func TestHandlerIgnoringItsContextIsAbandoned(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	stuck := make(chan struct{})
	defer close(stuck)
	const grace = 300 * time.Millisecond
	stop := startWorker(t, c, Config{Concurrency: 1, AbandonGrace: grace, Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		if j.Type == "stuck" {
			<-stuck // never looks at ctx
		}
		return nil
	})})
	id := enqueue(t, c, "stuck", "", queue.Timeout(100*time.Millisecond), queue.MaxRetry(0))
	next := enqueue(t, c, "fast", "")
	began := time.Now()
	j := waitState(t, c, "default", id, queue.StateDead, grace+5*time.Second)
	if took := time.Since(began); took < grace {
		t.Errorf("abandoned %s after the enqueue, before its %s timeout plus %s grace", took, 100*time.Millisecond, grace)
	}
	if !strings.Contains(j.LastError, "handler abandoned") || !strings.Contains(j.LastError, "within 300ms") ||
		!strings.Contains(j.LastError, "timeout after 100ms") {
		t.Errorf("abandoned job last_error = %q, want the abandonment and the timeout", j.LastError)
	}
	waitState(t, c, "default", next, queue.StateDone, 5*time.Second) // the only slot is free again
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return while an abandoned handler is still blocked")
	}
}

// A handler's context behaves as context.WithTimeout's would, though one timer serves
// every job: it has the job's deadline, and at the deadline Err and Cause report
// context.DeadlineExceeded, also in a context derived from it.
func TestHandlerContextHasTheJobsDeadline(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	type seen struct {
		left       time.Duration
		hasDL      bool
		err, cause error
		derivedErr error
	}
	got := make(chan seen, 1)
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		dl, ok := ctx.Deadline()
		s := seen{left: time.Until(dl), hasDL: ok}
		derived, cancel := context.WithTimeout(ctx, time.Hour) // as an HTTP call would
		defer cancel()
		<-ctx.Done()
		s.err, s.cause = ctx.Err(), context.Cause(ctx)
		<-derived.Done()
		s.derivedErr = derived.Err()
		got <- s
		return ctx.Err()
	})})
	enqueue(t, c, "x", "", queue.Timeout(200*time.Millisecond), queue.MaxRetry(0))
	select {
	case s := <-got:
		if !s.hasDL || s.left <= 0 || s.left > 200*time.Millisecond {
			t.Errorf("ctx.Deadline() = %s from the start, %v; want within the 200ms timeout", s.left, s.hasDL)
		}
		if s.err != context.DeadlineExceeded || s.cause != context.DeadlineExceeded {
			t.Errorf("at the deadline ctx.Err() = %v, Cause = %v; want context.DeadlineExceeded for both", s.err, s.cause)
		}
		if s.derivedErr != context.DeadlineExceeded {
			t.Errorf("a context derived from the handler's: Err() = %v at the deadline, want context.DeadlineExceeded", s.derivedErr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context never ended")
	}
}

// An idle worker wakes on its own timer for delayed jobs, not at the end of its blocking
// wait (proto.MaxWait, 1s): a regression here shows as lateness of hundreds of ms.
func TestIdleWorkerStartsDelayedJobsOnTime(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	started := make(chan time.Time, 8)
	startWorker(t, c, Config{Handler: HandlerFunc(func(context.Context, *queue.Job) error {
		started <- time.Now()
		return nil
	})})
	time.Sleep(50 * time.Millisecond) // let the worker go idle
	base := time.Now()
	var due []time.Time
	for i := range 5 {
		at := base.Add(time.Duration(300+170*i) * time.Millisecond)
		due = append(due, at)
		enqueue(t, c, "later", "", queue.At(at))
	}
	var late []time.Duration
	for i := range due {
		select {
		case at := <-started:
			late = append(late, at.Sub(due[i]))
		case <-time.After(5 * time.Second):
			t.Fatalf("delayed job %d never ran", i)
		}
	}
	slices.Sort(late)
	// Loose for a loaded machine (typical lateness is a few ms), tight enough to catch a
	// worker that waits for its blocking wait to time out.
	if median := late[len(late)/2]; median > 200*time.Millisecond {
		t.Errorf("median lateness %s of %v, want well under proto.MaxWait", median, late)
	}
}
