package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// BenchmarkProcess drains b.N pre-enqueued jobs (90-byte JSON payloads) at concurrency
// 100: the worker's whole hot path (claim, run, ack) against the real test Redis, with a
// no-op handler alone, in a Mux, and as a typed handler (HandleArgs) inside one
// middleware in a Mux.
func BenchmarkProcess(b *testing.B) {
	b.Run("plain", func(b *testing.B) {
		benchProcess(b, func(done func()) Handler {
			return HandlerFunc(func(context.Context, *queue.Job) error { done(); return nil })
		})
	})
	// keyed: the jobs spread over 1,000 limit keys under limits that never bind (queue
	// concurrency 10,000 and rate 1,000,000/s, key concurrency 10,000), issue 16's case:
	// what keyed jobs cost the worker beside plain ones (-cpuprofile), and Redis.
	b.Run("keyed", func(b *testing.B) {
		benchProcessOpts(b, benchKeyed, func(done func()) Handler {
			return HandlerFunc(func(context.Context, *queue.Job) error { done(); return nil })
		})
	})
	b.Run("mux", func(b *testing.B) {
		benchProcess(b, func(done func()) Handler {
			mux := NewMux()
			mux.HandleFunc("bench", func(context.Context, *queue.Job) error { done(); return nil })
			return mux
		})
	})
	b.Run("plain+decode", func(b *testing.B) { // what a plain handler that reads its payload pays
		benchProcess(b, func(done func()) Handler {
			return HandlerFunc(func(_ context.Context, j *queue.Job) error {
				var a benchArgs
				if err := json.Unmarshal(j.Payload, &a); err != nil {
					return err
				}
				done()
				return nil
			})
		})
	})
	b.Run("typed+middleware", func(b *testing.B) {
		benchProcess(b, func(done func()) Handler {
			mux := NewMux()
			mux.Use(func(next Handler) Handler {
				return HandlerFunc(func(ctx context.Context, j *queue.Job) error { return next.Process(ctx, j) })
			})
			HandleArgs(mux, func(context.Context, *queue.Job, benchArgs) error { done(); return nil })
			return mux
		})
	})
}

type benchArgs struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

func (benchArgs) Kind() string { return "bench" }

// benchPayload is 90 bytes of JSON that decodes into benchArgs.
var benchPayload = []byte(`{"url":"https://example.com/images/0123456789/abcdefghij/klmnopqrstu/vwx.png","width":640}`)

// benchKeyed sets never-binding limits on the default queue, and spreads its jobs over
// 1,000 limit keys, one after another (job i under key i % 1,000).
func benchKeyed(b *testing.B, c *queue.Client) func(i int) []queue.Option {
	l := queue.Limit{Concurrency: 10000, Rate: 1000000, Period: time.Second, KeyConcurrency: 10000}
	if err := c.SetLimit(context.Background(), queue.DefaultQueue, l); err != nil {
		b.Fatal(err)
	}
	return func(i int) []queue.Option { return []queue.Option{queue.LimitKey(fmt.Sprint("k", i%1000))} }
}

func benchProcess(b *testing.B, handler func(done func()) Handler) {
	benchProcessOpts(b, nil, handler)
}

// benchProcessOpts is benchProcess with set up by setup (nil: none), which returns the
// options of the i-th job.
func benchProcessOpts(b *testing.B, setup func(*testing.B, *queue.Client) func(int) []queue.Option,
	handler func(done func()) Handler) {
	c, err := queue.NewClient(redistest.Client(b), queue.Config{Prefix: redistest.Prefix(b), DoneRetention: -1})
	if err != nil {
		b.Fatal(err)
	}
	opts := func(int) []queue.Option { return nil }
	if setup != nil {
		opts = setup(b, c)
	}
	batch := make([]queue.BatchJob, 0, 1000)
	for i := 0; i < b.N; i += 1000 {
		batch = batch[:0]
		for k := range min(1000, b.N-i) {
			batch = append(batch, queue.BatchJob{Type: "bench", Payload: benchPayload, Options: opts(i + k)})
		}
		if _, err := c.EnqueueBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	all := make(chan struct{})
	w, err := New(c, Config{Concurrency: 100, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: handler(func() {
			if n.Add(1) == int64(b.N) {
				close(all)
			}
		})})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	go func() { w.Run(ctx); close(stopped) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatal("jobs did not all run")
	}
	b.StopTimer()
	cancel()
	<-stopped
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkHandlerContext is the cost per job of a handler's context as the worker makes
// it (the loop's WithCancelCause, the slot's WithValue and WithDeadline), cancelled when
// the handler returns: plain context package contexts, one timer each.
func BenchmarkHandlerContext(b *testing.B) {
	base := context.WithoutCancel(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		var a attempt
		cctx, cancelCause := context.WithCancelCause(base)
		ctx, cancel := context.WithDeadline(context.WithValue(cctx, attemptKey{}, &a), time.Now().Add(30*time.Minute))
		SetResult(ctx, nil)
		cancel()
		cancelCause(nil)
	}
}
