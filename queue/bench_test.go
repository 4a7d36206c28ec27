package queue

import (
	"bytes"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// Benchmarks of the hot path against the real test Redis (go test -bench . ./queue).
// Compare runs with benchstat; absolute figures depend on the machine.

func benchClient(b *testing.B) *Client {
	b.Helper()
	c, err := NewClient(redistest.Client(b), Config{Prefix: redistest.Prefix(b), DoneRetention: -1})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

var payload100 = bytes.Repeat([]byte("x"), 100)

func BenchmarkEnqueue(b *testing.B) {
	c := benchClient(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Enqueue(ctx, "bench", payload100); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnqueueParallel is many goroutines enqueuing one job each (a web server):
// concurrent calls are coalesced into shared script calls.
func BenchmarkEnqueueParallel(b *testing.B) {
	c := benchClient(b)
	b.ReportAllocs()
	b.SetParallelism(25) // x GOMAXPROCS goroutines
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Enqueue(ctx, "bench", payload100); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkEnqueueBatch1000(b *testing.B) {
	c := benchClient(b)
	batch := make([]BatchJob, 1000)
	for i := range batch {
		batch[i] = BatchJob{Type: "bench", Payload: payload100}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimAck100 claims 100 jobs in one call and acknowledges them concurrently,
// as a worker of concurrency 100 does: the per-job cost of the two transitions.
func BenchmarkClaimAck100(b *testing.B) {
	c := benchClient(b)
	batch := make([]BatchJob, 100)
	for i := range batch {
		batch[i] = BatchJob{Type: "bench", Payload: payload100}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if _, err := c.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		jobs, err := c.Claim(ctx, "default", 100, time.Minute, "w")
		if err != nil || len(jobs) != 100 {
			b.Fatalf("Claim() = %d, %v", len(jobs), err)
		}
		done := make(chan error, len(jobs))
		for _, j := range jobs {
			go func() { done <- c.Ack(ctx, j, nil) }()
		}
		for range jobs {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
}
