package worker

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// BenchmarkProcess drains b.N pre-enqueued jobs with a no-op handler at concurrency 100:
// the worker's whole hot path (claim, run, ack) against the real test Redis.
// BenchmarkProcess drains pre-enqueued no-op jobs with a worker of concurrency 100, with
// the metrics history on (the default) and off: run with -count N to interleave them.
func BenchmarkProcess(b *testing.B) {
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"history=on", 0}, {"history=off", -1}} {
		b.Run(tc.name, func(b *testing.B) { benchProcess(b, tc.every) })
	}
}

func benchProcess(b *testing.B, history time.Duration) {
	c, err := queue.NewClient(redistest.Client(b), queue.Config{Prefix: redistest.Prefix(b), DoneRetention: -1})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]queue.BatchJob, 0, 1000)
	for i := 0; i < b.N; i += 1000 {
		batch = batch[:0]
		for range min(1000, b.N-i) {
			batch = append(batch, queue.BatchJob{Type: "bench", Payload: make([]byte, 100)})
		}
		if _, err := c.EnqueueBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	all := make(chan struct{})
	w, err := New(c, Config{Concurrency: 100, HistoryInterval: history, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: HandlerFunc(func(context.Context, *queue.Job) error {
			if n.Add(1) == int64(b.N) {
				close(all)
			}
			return nil
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
