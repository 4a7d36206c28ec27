package jobstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

type welcome struct {
	Email string `json:"email"`
}

func (welcome) Kind() string { return "email:welcome" }

// fakeT records Fatalf instead of stopping the test, to test the assertions' failures.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

// Errorf records the failure; the helper goes on, as with a real T.
func (f *fakeT) Errorf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func (f *fakeT) Helper() {}

// fails runs fn with a fakeT and reports whether it called Fatalf or Errorf.
func fails(t *testing.T, fn func(tb testing.TB)) (failed bool) {
	f := &fakeT{TB: t}
	defer func() {
		if r := recover(); r != nil {
			if r != f {
				panic(r)
			}
			failed = true
		}
	}()
	fn(f)
	return f.failed != ""
}

func TestRequireEnqueued(t *testing.T) {
	c := NewClient(t, queue.Config{})
	ctx := context.Background()
	if !fails(t, func(tb testing.TB) { RequireEnqueued(tb, c, "email", "email:welcome", []byte(`{}`)) }) {
		t.Error("RequireEnqueued passed on an empty Redis")
	}
	if _, err := c.EnqueueArgs(ctx, welcome{Email: "ada@example.com"}, queue.On("email")); err != nil {
		t.Fatal(err)
	}
	if j := RequireEnqueued(t, c, "email", "email:welcome", []byte(`{ "email": "ada@example.com" }`)); j == nil {
		t.Error("RequireEnqueued returned no job")
	}
	RequireEnqueuedArgs(t, c, "email", welcome{Email: "ada@example.com"})
	for name, fn := range map[string]func(testing.TB){
		"other payload": func(tb testing.TB) { RequireEnqueuedArgs(tb, c, "email", welcome{Email: "bob@example.com"}) },
		"other queue":   func(tb testing.TB) { RequireEnqueuedArgs(tb, c, "default", welcome{Email: "ada@example.com"}) },
		"other type":    func(tb testing.TB) { RequireEnqueued(tb, c, "email", "sms", []byte(`{"email":"ada@example.com"}`)) },
	} {
		if !fails(t, fn) {
			t.Errorf("%s: RequireEnqueued passed", name)
		}
	}
}

func TestDrainRunsJobsToTheirEnd(t *testing.T) {
	c := NewClient(t, queue.Config{})
	ctx := context.Background()
	mux := worker.NewMux()
	worker.HandleArgs(mux, func(ctx context.Context, job *queue.Job, w welcome) error {
		if strings.HasPrefix(w.Email, "bad") {
			return errors.New("mailbox full")
		}
		worker.SetResult(ctx, []byte("sent to "+w.Email))
		return nil
	})
	for _, e := range []string{"ada@example.com", "bad@example.com"} {
		if _, err := c.EnqueueArgs(ctx, welcome{Email: e}, queue.MaxRetry(2)); err != nil {
			t.Fatal(err)
		}
	}
	later, _ := c.EnqueueArgs(ctx, welcome{Email: "later@example.com"}, queue.Delay(time.Hour))
	jobs := Drain(t, c, worker.Config{Handler: mux, Concurrency: 1,
		BackoffFunc: func(*queue.Job, error) time.Duration { return time.Millisecond }})
	if len(jobs) != 2 {
		t.Fatalf("Drain ran %d jobs, want 2", len(jobs))
	}
	if jobs[0].State != queue.StateDone || string(jobs[0].Result) != "sent to ada@example.com" {
		t.Errorf("first job %s %q, want done with its result", jobs[0].State, jobs[0].Result)
	}
	if jobs[1].State != queue.StateDead || jobs[1].Attempt != 3 || jobs[1].LastError != "mailbox full" {
		t.Errorf("second job %s after %d attempts (%q), want dead after 3", jobs[1].State, jobs[1].Attempt, jobs[1].LastError)
	}
	if j, _ := c.Get(ctx, queue.DefaultQueue, later); j == nil || j.State != queue.StateScheduled {
		t.Errorf("a job due in an hour was not left waiting: %+v", j)
	}
}

// A job whose type cfg.Handler does not handle would be postponed, unrun, and left
// waiting: Drain fails the test naming it, instead of returning as if all had run.
func TestDrainFailsOnAJobWithoutHandler(t *testing.T) {
	c := NewClient(t, queue.Config{})
	ctx := context.Background()
	mux := worker.NewMux()
	mux.HandleFunc("known", func(context.Context, *queue.Job) error { return nil })
	id, err := c.Enqueue(ctx, "unknown", nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeT{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != f {
				panic(r)
			}
		}()
		Drain(f, c, worker.Config{Handler: mux})
	}()
	if !strings.Contains(f.failed, id) || !strings.Contains(f.failed, `"unknown"`) || !strings.Contains(f.failed, "no handler") {
		t.Errorf("Drain with a job of a type without handler: failure %q, want one naming job %s, its type and no handler", f.failed, id)
	}
}

// Jobs waiting under a limit key are waiting jobs for the helpers: RequireEnqueued finds
// them, and Drain runs every one, though the key's concurrency of 1 leaves all but one in
// the key's list at any time.
func TestDrainRunsKeyedJobs(t *testing.T) {
	c := NewClient(t, queue.Config{})
	ctx := context.Background()
	if err := c.SetLimit(ctx, queue.DefaultQueue, queue.Limit{KeyConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		if _, err := c.EnqueueArgs(ctx, welcome{Email: e}, queue.LimitKey("tenant:1")); err != nil {
			t.Fatal(err)
		}
	}
	RequireEnqueuedArgs(t, c, queue.DefaultQueue, welcome{Email: "c@example.com"})
	mux := worker.NewMux()
	worker.HandleArgs(mux, func(ctx context.Context, job *queue.Job, w welcome) error {
		time.Sleep(10 * time.Millisecond) // the key's next job waits in its list meanwhile
		return nil
	})
	jobs := Drain(t, c, worker.Config{Handler: mux, Concurrency: 4})
	if len(jobs) != 3 {
		t.Fatalf("Drain ran %d keyed jobs, want 3", len(jobs))
	}
	for _, j := range jobs {
		if j.State != queue.StateDone || j.LimitKey != "tenant:1" {
			t.Errorf("job %s is %s under key %q, want done under tenant:1", j.ID, j.State, j.LimitKey)
		}
	}
}

// Without redis-server on PATH, NewClient runs an in-memory server, and jobs run on it.
func TestNewClientWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	c := NewClient(t, queue.Config{})
	if _, err := c.EnqueueArgs(context.Background(), welcome{Email: "ada@example.com"}); err != nil {
		t.Fatal(err)
	}
	mux := worker.NewMux()
	worker.HandleArgs(mux, func(context.Context, *queue.Job, welcome) error { return nil })
	jobs := Drain(t, c, worker.Config{Handler: mux})
	if len(jobs) != 1 || jobs[0].State != queue.StateDone {
		t.Fatalf("Drain on the in-memory server ran %d jobs: %+v", len(jobs), jobs)
	}
}
