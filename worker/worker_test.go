package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var ctx = context.Background()

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newClient(t *testing.T) *queue.Client {
	t.Helper()
	c, err := queue.NewClient(redistest.Client(t), queue.Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startWorker runs a worker until the test ends (or stop is called) and returns stop,
// which cancels it and waits for Run to return.
func startWorker(t *testing.T, c *queue.Client, cfg Config) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.BackoffFunc == nil {
		cfg.BackoffFunc = func(*queue.Job, error) time.Duration { return 10 * time.Millisecond }
	}
	w, err := New(c, cfg)
	if err != nil {
		t.Fatalf("New() err = %v", err)
	}
	return runWorker(t, w)
}

// runWorker runs w until the test ends (or stop is called) and returns stop, which
// cancels it and waits for Run to return.
func runWorker(t *testing.T, w *Worker) (stop func()) {
	t.Helper()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run() err = %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitState(t *testing.T, c *queue.Client, q, id string, want queue.State, within time.Duration) *queue.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := c.Get(ctx, q, id)
		if err == nil && j.State == want {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: state %v (err %v) after %s, want %s", id, j, err, within, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func enqueue(t *testing.T, c *queue.Client, typ, payload string, opts ...queue.Option) string {
	t.Helper()
	id, err := c.Enqueue(ctx, typ, []byte(payload), opts...)
	if err != nil {
		t.Fatalf("Enqueue() err = %v", err)
	}
	return id
}

func TestRunsJobAndStoresResult(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	mux := NewMux()
	mux.HandleFunc("greet", func(ctx context.Context, j *queue.Job) error {
		SetResult(ctx, []byte("hello "+string(j.Payload)))
		return nil
	})
	startWorker(t, c, Config{Handler: mux})
	id := enqueue(t, c, "greet", "ann")
	j := waitState(t, c, "default", id, queue.StateDone, 5*time.Second)
	if string(j.Result) != "hello ann" || j.Attempt != 1 || j.Worker == "" {
		t.Errorf("done job = result %q attempt %d worker %q", j.Result, j.Attempt, j.Worker)
	}
}

func TestRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var calls atomic.Int32
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		calls.Add(1)
		return fmt.Errorf("attempt %d failed", j.Attempt)
	})})
	id := enqueue(t, c, "x", "", queue.MaxRetry(2))
	j := waitState(t, c, "default", id, queue.StateDead, 5*time.Second)
	if calls.Load() != 3 || j.Attempt != 3 || j.LastError != "attempt 3 failed" {
		t.Errorf("calls %d, attempt %d, last_error %q; want 3, 3, attempt 3 failed", calls.Load(), j.Attempt, j.LastError)
	}
}

func TestRetrySucceedsLater(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		if j.Attempt < 3 {
			return errors.New("not yet")
		}
		return nil
	})})
	id := enqueue(t, c, "x", "")
	if j := waitState(t, c, "default", id, queue.StateDone, 5*time.Second); j.Attempt != 3 {
		t.Errorf("attempt = %d, want 3", j.Attempt)
	}
}

func TestSkipRetryDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		return SkipRetry(errors.New("malformed payload"))
	})})
	id := enqueue(t, c, "x", "")
	j := waitState(t, c, "default", id, queue.StateDead, 5*time.Second)
	if j.Attempt != 1 || !strings.Contains(j.LastError, "malformed payload") {
		t.Errorf("attempt %d last_error %q", j.Attempt, j.LastError)
	}
}

func TestPanicIsAFailureWithStack(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		panic("kaboom")
	})})
	id := enqueue(t, c, "x", "", queue.MaxRetry(0))
	j := waitState(t, c, "default", id, queue.StateDead, 5*time.Second)
	if !strings.Contains(j.LastError, "panic: kaboom") || !strings.Contains(j.LastError, "worker_test.go") {
		t.Errorf("last_error = %q, want the panic and its stack", j.LastError)
	}
}

func TestTimeoutCancelsHandler(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		<-ctx.Done()
		return ctx.Err()
	})})
	id := enqueue(t, c, "slow", "", queue.Timeout(100*time.Millisecond), queue.MaxRetry(0))
	j := waitState(t, c, "default", id, queue.StateDead, 5*time.Second)
	if !strings.Contains(j.LastError, "timeout after 100ms") {
		t.Errorf("last_error = %q", j.LastError)
	}
}

func TestDelayedJobRunsWhenDue(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	started := make(chan time.Time, 1)
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		started <- time.Now()
		return nil
	})})
	time.Sleep(50 * time.Millisecond) // let the worker go idle
	due := time.Now().Add(300 * time.Millisecond)
	enqueue(t, c, "later", "", queue.At(due))
	select {
	case at := <-started:
		// Functional bound only; precision is measured by the benchmark, not here.
		if at.Before(due.Add(-5*time.Millisecond)) || at.After(due.Add(time.Second)) {
			t.Errorf("started %s after due", at.Sub(due))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("delayed job never ran")
	}
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var now, peak atomic.Int32
	startWorker(t, c, Config{Concurrency: 3, Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		now.Add(-1)
		return nil
	})})
	var ids []string
	for range 15 {
		ids = append(ids, enqueue(t, c, "x", ""))
	}
	for _, id := range ids {
		waitState(t, c, "default", id, queue.StateDone, 5*time.Second)
	}
	if peak.Load() != 3 {
		t.Errorf("peak concurrency = %d, want 3", peak.Load())
	}
}

func TestWeightedQueuesAllServed(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	startWorker(t, c, Config{Queues: map[string]int{"high": 5, "low": 1},
		Handler: HandlerFunc(func(context.Context, *queue.Job) error { return nil })})
	var ids [][2]string
	for i := range 20 {
		q := "high"
		if i%2 == 0 {
			q = "low"
		}
		ids = append(ids, [2]string{q, enqueue(t, c, "x", "", queue.On(q))})
	}
	for _, p := range ids {
		waitState(t, c, p[0], p[1], queue.StateDone, 5*time.Second)
	}
}

func TestCrashedWorkersJobIsRecovered(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	id := enqueue(t, c, "x", "")
	// A worker that claims and then dies: it never heartbeats, acks or hands back.
	if jobs, err := broker.Of(c).Claim(ctx, "default", 1, 200*time.Millisecond, "dead-worker"); err != nil || len(jobs) != 1 {
		t.Fatalf("Claim() = %v, %v", jobs, err)
	}
	startWorker(t, c, Config{Lease: 200 * time.Millisecond,
		Handler: HandlerFunc(func(context.Context, *queue.Job) error { return nil })})
	j := waitState(t, c, "default", id, queue.StateDone, 5*time.Second)
	if j.Attempt != 2 || !strings.Contains(j.LastError, "dead-worker") {
		t.Errorf("recovered job attempt %d last_error %q", j.Attempt, j.LastError)
	}
}

func TestLongJobKeepsLeaseByHeartbeat(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var runs atomic.Int32
	// Renewed every 333ms, a heartbeat may be late by two thirds of the lease before the
	// watchdog stops the run: at 400ms (133ms of slack, each) a loaded -race cluster pass
	// ran the job twice.
	startWorker(t, c, Config{Lease: time.Second,
		Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			runs.Add(1)
			select {
			case <-time.After(3500 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})})
	id := enqueue(t, c, "x", "")
	j := waitState(t, c, "default", id, queue.StateDone, 10*time.Second)
	if runs.Load() != 1 || j.Attempt != 1 {
		t.Errorf("runs %d attempt %d: a 3.5s job on a 1s lease must run once", runs.Load(), j.Attempt)
	}
}

func TestShutdownFinishesRunningJobs(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	started := make(chan struct{})
	stop := startWorker(t, c, Config{ShutdownTimeout: 5 * time.Second,
		Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			close(started)
			time.Sleep(300 * time.Millisecond)
			return nil
		})})
	id := enqueue(t, c, "x", "")
	<-started
	stop()
	if j, _ := c.Get(ctx, "default", id); j.State != queue.StateDone {
		t.Errorf("after shutdown state = %s, want done", j.State)
	}
}

func TestShutdownHandsBackUnfinishedJobs(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	started := make(chan struct{})
	stop := startWorker(t, c, Config{ShutdownTimeout: 100 * time.Millisecond,
		Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})})
	id := enqueue(t, c, "x", "")
	<-started
	stop()
	j, _ := c.Get(ctx, "default", id)
	if j.State != queue.StateReady || j.Attempt != 0 {
		t.Errorf("after shutdown state %s attempt %d, want ready, 0 (handed back uncounted)", j.State, j.Attempt)
	}
	// The next worker takes it at once.
	startWorker(t, c, Config{Handler: HandlerFunc(func(context.Context, *queue.Job) error { return nil })})
	waitState(t, c, "default", id, queue.StateDone, 5*time.Second)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	c, _ := queue.NewClient(redistest.Client(t), queue.Config{})
	h := HandlerFunc(func(context.Context, *queue.Job) error { return nil })
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Handler is nil"},
		{Config{Handler: h, Concurrency: -1}, "Concurrency"},
		{Config{Handler: h, Lease: time.Millisecond}, "Lease"},
		{Config{Handler: h, Queues: map[string]int{"a b": 1}}, "queue name"},
		{Config{Handler: h, Queues: map[string]int{"a": 0}}, "weight"},
	}
	for _, tc := range cases {
		if _, err := New(c, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) err = %v, want it to mention %q", tc.cfg, err, tc.want)
		}
	}
}

func TestDefaultBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempt  int
		min, max time.Duration
	}{{1, time.Second, 2 * time.Second}, {3, 4 * time.Second, 8 * time.Second},
		{9, 150 * time.Second, 5 * time.Minute}, {64, 150 * time.Second, 5 * time.Minute}} {
		for range 100 {
			d := DefaultBackoff(&queue.Job{Attempt: tc.attempt}, nil)
			if d < tc.min || d > tc.max {
				t.Fatalf("DefaultBackoff(attempt %d) = %s, want in [%s, %s]", tc.attempt, d, tc.min, tc.max)
			}
		}
	}
}

func TestExclusiveJobsNeverOverlap(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var running, peak, runs atomic.Int32
	h := HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		runs.Add(1)
		if j.Type != "report" {
			return nil
		}
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	// Two workers, as two processes would be: each has free slots for every job.
	startWorker(t, c, Config{Handler: h, Concurrency: 5})
	startWorker(t, c, Config{Handler: h, Concurrency: 5})
	var ids []string
	for range 8 {
		ids = append(ids, enqueue(t, c, "report", "", queue.Exclusive("")))
	}
	other := enqueue(t, c, "free", "") // not exclusive: runs alongside
	for _, id := range ids {
		if j := waitState(t, c, "default", id, queue.StateDone, 30*time.Second); j.Attempt != 1 {
			t.Errorf("job %s attempt %d: deferrals must not count as attempts", id, j.Attempt)
		}
	}
	waitState(t, c, "default", other, queue.StateDone, 5*time.Second)
	if peak.Load() != 1 || runs.Load() != 9 {
		t.Errorf("%d exclusive jobs ran at once, %d runs; want 1 at a time, 9 runs", peak.Load(), runs.Load())
	}
}

func TestCancelStopsARunningJob(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	started := make(chan struct{})
	startWorker(t, c, Config{Lease: 600 * time.Millisecond, Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})})
	id := enqueue(t, c, "x", "")
	<-started
	if state, err := c.Cancel(ctx, "default", id); err != nil || state != queue.StateActive {
		t.Fatalf("Cancel() = %s, %v", state, err)
	}
	j := waitState(t, c, "default", id, queue.StateDead, 5*time.Second)
	if !strings.Contains(j.LastError, "cancelled by operator") || j.Attempt != 1 {
		t.Errorf("cancelled job: attempt %d last_error %q", j.Attempt, j.LastError)
	}
}
