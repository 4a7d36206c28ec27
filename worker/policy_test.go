package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// Snooze, and RetryAfter (its alias for a 429), run the job again later without counting
// the attempt or losing its last error, also when wrapped.
func TestSnoozeDoesNotCountTheAttempt(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var mu sync.Mutex
	var calls []int
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, j.Attempt)
		switch len(calls) {
		case 1:
			return errors.New("first failure")
		case 2:
			return Snooze(20 * time.Millisecond)
		case 3:
			return fmt.Errorf("payments API: %w", RetryAfter(20*time.Millisecond)) // a 429, wrapped
		}
		return nil
	})})
	id, err := c.Enqueue(ctx, "t", nil, queue.MaxRetry(1))
	if err != nil {
		t.Fatal(err)
	}
	j := waitState(t, c, queue.DefaultQueue, id, queue.StateDone, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	// Attempt 1 failed; attempt 2 snoozed twice (Snooze, RetryAfter), then succeeded: with max retry 1, a
	// counted snooze would have sent the job to the dead set.
	if len(calls) != 4 || calls[3] != 2 || j.Attempt != 2 || j.Postponed != 2 {
		t.Errorf("attempts seen %v, job attempt %d postponed %d; want [1 2 2 2], 2, 2", calls, j.Attempt, j.Postponed)
	}
}

// A handler that snoozes for nothing (0, or a Retry-After already past) does not spin:
// its first snoozes are at once, then each waits longer, up to a second. Before the floor
// one job ran about 450 times a second (908 runs in 2 s), each a claim, a hand back and an
// Info line. A snooze asked for a second is still exactly a second.
func TestSnoozeForNothingDoesNotSpin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{{"Snooze(0)", Snooze(0)}, {"RetryAfter(past)", RetryAfter(-time.Second)}, {"PauseKey(0)", PauseKey(0)}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t)
			var runs atomic.Int64
			startWorker(t, c, Config{Logger: quiet, Handler: HandlerFunc(func(context.Context, *queue.Job) error {
				runs.Add(1)
				return tc.err // one shared error value, as a handler may return
			})})
			id := enqueue(t, c, "t", "", queue.LimitKey("k"))
			time.Sleep(3 * time.Second)
			// 10 at once, then 10, 20, 40 ... 640 ms, 1 s: about 18 in 3 s.
			if n := runs.Load(); n > 30 || n < 12 {
				t.Errorf("%s: %d runs in 3s, want the first 10 at once and then fewer and fewer (about 18)", tc.name, n)
			}
			j, err := c.Get(ctx, queue.DefaultQueue, id)
			if err != nil || j.Attempt > 1 {
				t.Errorf("job %+v, %v: want its attempts uncounted", j, err)
			}
		})
	}
	if d := snoozeFloor(100); d != time.Second {
		t.Errorf("snoozeFloor(100) = %s, want 1s", d)
	}
	if d := snoozeFloor(9); d != 0 {
		t.Errorf("snoozeFloor(9) = %s, want 0: a few quick snoozes wait what they ask", d)
	}
}

// A snooze of an exec handler: exit ExitSnooze with the delay as stdout's last line.
func TestExecSnooze(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ex, err := NewExec(`sh -c 'if [ "$JOB_ATTEMPT" = 1 ] && [ ! -e "$0" ]; then touch "$0"; echo 10ms; exit 76; fi' ` + t.TempDir() + "/snoozed")
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, c, Config{Handler: ex})
	id, _ := c.Enqueue(ctx, "t", nil, queue.MaxRetry(0))
	j := waitState(t, c, queue.DefaultQueue, id, queue.StateDone, 10*time.Second)
	if j.Attempt != 1 || j.Postponed != 1 {
		t.Errorf("attempt %d, postponed %d; want the snooze uncounted: 1, 1", j.Attempt, j.Postponed)
	}
	for _, tc := range []struct{ program, want string }{
		{`sh -c 'exit 76'`, "without a delay as the last line of stdout"},
		{`sh -c 'echo soon; exit 76'`, `with "soon" as the last line of stdout, not a delay`},
		// Past time.Duration's range: said so, not "without a delay" (QA).
		{`sh -c 'echo 100000000h; exit 76'`, `with "100000000h" as the last line of stdout, not a delay ("30s", "5m" or seconds, at most 2562047h0m0s)`},
	} {
		bad, _ := NewExec(tc.program)
		c2 := newClient(t)
		startWorker(t, c2, Config{Handler: bad})
		id, _ = c2.Enqueue(ctx, "t", nil, queue.MaxRetry(0))
		j = waitState(t, c2, queue.DefaultQueue, id, queue.StateDead, 10*time.Second)
		if !strings.Contains(j.LastError, tc.want) {
			t.Errorf("%s: last error %q, want %q", tc.program, j.LastError, tc.want)
		}
	}
}

// Per-type policies replace the job's timeout, bound its retries and set its backoff.
func TestTypePolicies(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	deadlines := make(chan time.Duration, 10)
	var backoffs sync.Map
	startWorker(t, c, Config{
		Types: map[string]TypePolicy{
			"slow":  {Timeout: 2 * time.Hour},
			"flaky": {MaxRetry: 1, Backoff: func(j *queue.Job, _ error) time.Duration { backoffs.Store(j.ID, true); return time.Millisecond }},
		},
		Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			if j.Type == "slow" {
				d, _ := ctx.Deadline()
				deadlines <- time.Until(d)
				return nil
			}
			return errors.New("still flaky")
		}),
	})
	slow, _ := c.Enqueue(ctx, "slow", nil) // its own timeout: the default 30 min
	flaky, _ := c.Enqueue(ctx, "flaky", nil, queue.MaxRetry(10))
	waitState(t, c, queue.DefaultQueue, slow, queue.StateDone, 5*time.Second)
	if d := <-deadlines; d < 119*time.Minute {
		t.Errorf("slow job's deadline in %s, want the type's 2h", d)
	}
	j := waitState(t, c, queue.DefaultQueue, flaky, queue.StateDead, 5*time.Second)
	if _, ok := backoffs.Load(flaky); j.Attempt != 2 || !ok {
		t.Errorf("flaky job dead after %d attempts (type backoff used: %v), want 2 (MaxRetry 1) and the type's backoff", j.Attempt, ok)
	}
	if _, err := New(c, Config{Handler: HandlerFunc(noop), Types: map[string]TypePolicy{"x": {Timeout: time.Microsecond}}}); err == nil {
		t.Error("New accepted a sub-millisecond type timeout")
	}
	for _, typ := range []string{"", "a\nb", strings.Repeat("t", 129)} {
		if _, err := New(c, Config{Handler: HandlerFunc(noop), Types: map[string]TypePolicy{typ: {MaxRetry: 1}}}); err == nil {
			t.Errorf("New accepted a policy for type %q, which no job can have", typ)
		}
	}
}

// OnError sees every recorded failure, a panic with its stack; OnDead the death.
func TestErrorHooks(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	type call struct {
		state queue.State
		err   error
	}
	errs, deaths := make(chan call, 10), make(chan call, 10)
	startWorker(t, c, Config{
		OnError: func(j *queue.Job, err error) { errs <- call{j.State, err} },
		OnDead:  func(j *queue.Job, err error) { deaths <- call{j.State, err} },
		Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			if j.Attempt == 1 {
				panic("boom")
			}
			return errors.New("no luck")
		}),
		BackoffFunc: func(*queue.Job, error) time.Duration { return time.Millisecond },
	})
	id, _ := c.Enqueue(ctx, "t", nil, queue.MaxRetry(1))
	waitState(t, c, queue.DefaultQueue, id, queue.StateDead, 5*time.Second)
	// Two failures, two calls. Their order is not promised: each runs on its own call's
	// goroutine, and with a 1ms backoff the second attempt's can run first.
	first, second := <-errs, <-errs
	if first.state == queue.StateDead {
		first, second = second, first
	}
	var pe *PanicError
	if first.state != queue.StateRetry || !errors.As(first.err, &pe) || pe.Value != "boom" ||
		!strings.Contains(string(pe.Stack), "policy_test.go") {
		t.Errorf("first OnError: %s, %v; want retry and a *PanicError with the handler's stack", first.state, first.err)
	}
	if second.state != queue.StateDead || second.err.Error() != "no luck" {
		t.Errorf("second OnError: %s, %v; want dead, no luck", second.state, second.err)
	}
	select {
	case d := <-deaths:
		if d.state != queue.StateDead {
			t.Errorf("OnDead with state %s", d.state)
		}
	case <-time.After(time.Second):
		t.Error("OnDead not called")
	}
	if len(deaths) != 0 || len(errs) != 0 {
		t.Errorf("%d more OnDead and %d more OnError calls than failures", len(deaths), len(errs))
	}
}

// PauseKey of a job without a limit key is a snooze, as its doc says, and is recorded
// as one: no "limit key paused" error on the job (QA: exit 77 of an unkeyed job read as a
// key's pause in its last error and the log).
func TestPauseKeyWithoutALimitKeyIsASnooze(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var runs atomic.Int32
	var errAt2 atomic.Value
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		if runs.Add(1) == 1 {
			return PauseKey(20 * time.Millisecond)
		}
		errAt2.Store(j.LastError)
		return nil
	})})
	id, err := c.Enqueue(ctx, "t", nil, queue.MaxRetry(0))
	if err != nil {
		t.Fatal(err)
	}
	j := waitState(t, c, queue.DefaultQueue, id, queue.StateDone, 10*time.Second)
	if j.Attempt != 1 || j.Postponed != 1 || runs.Load() != 2 {
		t.Errorf("attempt %d postponed %d runs %d; want 1, 1, 2", j.Attempt, j.Postponed, runs.Load())
	}
	if got := errAt2.Load(); got != "" {
		t.Errorf("second run saw last error %q, want none (a snooze)", got)
	}
}
