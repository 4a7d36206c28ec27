package worker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

type resize struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

func (resize) Kind() string { return "image:resize" }

func (resize) JobOptions() []queue.Option {
	return []queue.Option{queue.On("images"), queue.MaxRetry(2)}
}

// A typed job is enqueued with its type's options and reaches its handler decoded.
func TestHandleArgsRunsTypedJobs(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	got := make(chan resize, 1)
	mux := NewMux()
	HandleArgs(mux, func(ctx context.Context, job *queue.Job, args resize) error {
		got <- args
		return nil
	})
	startWorker(t, c, Config{Handler: mux, Queues: map[string]int{"images": 1}})
	want := resize{URL: "https://example.com/a.png", Width: 640}
	id, err := c.EnqueueArgs(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case args := <-got:
		if args != want {
			t.Errorf("handler got %+v, want %+v", args, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("typed job not run within 5s")
	}
	j := waitState(t, c, "images", id, queue.StateDone, 5*time.Second)
	if j.Type != "image:resize" || j.MaxRetry != 2 {
		t.Errorf("job type %q max retry %d, want image:resize and the type's 2", j.Type, j.MaxRetry)
	}
}

// A payload that does not decode into the type dies at once: no retry can fix it.
func TestHandleArgsBadPayloadDiesAtOnce(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var ran atomic.Bool
	mux := NewMux()
	HandleArgs(mux, func(context.Context, *queue.Job, resize) error { ran.Store(true); return nil })
	startWorker(t, c, Config{Handler: mux, Queues: map[string]int{"images": 1}})
	id, err := c.Enqueue(ctx, "image:resize", []byte(`{"width":"wide"}`), queue.On("images"), queue.MaxRetry(5))
	if err != nil {
		t.Fatal(err)
	}
	j := waitState(t, c, "images", id, queue.StateDead, 5*time.Second)
	if ran.Load() || j.Attempt != 1 || !strings.Contains(j.LastError, "does not decode into worker.resize") {
		t.Errorf("ran %v, attempt %d, last error %q; want dead on attempt 1 naming the type", ran.Load(), j.Attempt, j.LastError)
	}
}

// Middleware wraps every handler, registered before or after Use, the first outermost,
// and does not run for a job the Mux has no handler for.
func TestMuxUseWrapsEveryHandlerInOrder(t *testing.T) {
	var mu sync.Mutex
	var trace []string
	note := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
	mw := func(name string) Middleware {
		return func(next Handler) Handler {
			return HandlerFunc(func(ctx context.Context, job *queue.Job) error {
				note(name + ">")
				err := next.Process(ctx, job)
				note("<" + name)
				return err
			})
		}
	}
	mux := NewMux()
	mux.HandleFunc("before", func(context.Context, *queue.Job) error { note("before"); return nil })
	mux.Use(mw("a"), mw("b"))
	mux.Use(mw("c"))
	mux.HandleFunc("after", func(context.Context, *queue.Job) error { note("after"); return errors.New("x") })
	for _, typ := range []string{"before", "after", "missing"} {
		err := mux.Process(context.Background(), &queue.Job{Type: typ})
		if typ == "missing" && !errors.Is(err, ErrNoHandler) || typ == "after" && (err == nil || err.Error() != "x") {
			t.Errorf("Process(%s) = %v", typ, err)
		}
	}
	want := []string{"a>", "b>", "c>", "before", "<c", "<b", "<a", "a>", "b>", "c>", "after", "<c", "<b", "<a"}
	if !slices.Equal(trace, want) {
		t.Errorf("trace %q, want %q", trace, want)
	}
}

// BenchmarkMuxDispatch measures what a typed handler inside one middleware costs per job
// against a plain handler (the worker's own cost per job is ~15µs: this must stay small).
func BenchmarkMuxDispatch(b *testing.B) {
	job := &queue.Job{Type: "image:resize", Payload: []byte(`{"url":"https://example.com/a.png","width":640}`)}
	pass := func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, j *queue.Job) error { return next.Process(ctx, j) })
	}
	b.Run("plain", func(b *testing.B) {
		mux := NewMux()
		mux.HandleFunc("image:resize", func(context.Context, *queue.Job) error { return nil })
		for b.Loop() {
			_ = mux.Process(ctx, job)
		}
	})
	b.Run("typed+middleware", func(b *testing.B) {
		mux := NewMux()
		mux.Use(pass)
		HandleArgs(mux, func(context.Context, *queue.Job, resize) error { return nil })
		for b.Loop() {
			_ = mux.Process(ctx, job)
		}
	})
}
