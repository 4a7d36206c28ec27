package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// BenchmarkPickup is where an idle worker's pickup goes: one job at a time, Enqueue
// call to handler start, split at the worker's trace points (Worker.trace). Reported as
// medians in microseconds, each segment from the one before:
//
//	enqueue-us  the Enqueue call (the job is written, and its wake token pushed or the job
//	            handed to the waiting worker, within it)
//	wake-us     Enqueue's start to the worker's wait returning the token or the handed job
//	loop-us     the token to the claim being sent (the loop's turn)
//	claim-us    the claim's round trip
//	start-us    the claim's reply, or the handed job, to the handler's start (the loop,
//	            then the slot)
//	handed-%    the pickups whose job was handed to the worker (no claim: loop-us and
//	            claim-us are of the others)
//	p50-us, p99-us  the whole pickup
//
// "gap=20ms" leaves the worker idle between jobs as `jobs bench --mode latency` does
// (the processes' threads and CPUs go idle, and each hop pays their wake-up); "gap=0"
// sends the next job as soon as the last one started.
func BenchmarkPickup(b *testing.B) {
	for _, gap := range []time.Duration{20 * time.Millisecond, 0} {
		b.Run(fmt.Sprintf("gap=%s", gap), func(b *testing.B) { benchPickup(b, gap) })
	}
}

func benchPickup(b *testing.B, gap time.Duration) {
	c, err := queue.NewClient(redistest.Client(b), queue.Config{Prefix: redistest.Prefix(b), DoneRetention: -1})
	if err != nil {
		b.Fatal(err)
	}
	var marks [traceDrained + 1]atomic.Int64 // by tracePoint: the first of each since the last reset
	started := make(chan time.Time, 1)
	w, err := New(c, Config{Concurrency: 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: HandlerFunc(func(context.Context, *queue.Job) error {
			select {
			case started <- time.Now():
			default:
			}
			return nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	w.trace = func(p tracePoint, at time.Time) { marks[p].CompareAndSwap(0, at.UnixNano()) }
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { w.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	pickup := func() (enq, t0 time.Time, end time.Time) {
		for i := range marks {
			marks[i].Store(0)
		}
		t0 = time.Now()
		if _, err := c.Enqueue(ctx, "pickup", nil); err != nil {
			b.Fatal(err)
		}
		enq = time.Now()
		select {
		case end = <-started:
		case <-time.After(10 * time.Second):
			b.Fatal("the job did not start within 10s")
		}
		return enq, t0, end
	}
	for range 20 { // warm up: connections dialled, scripts loaded, handlers timed
		pickup()
		time.Sleep(gap)
	}
	var total, enqueue, wake, loop, claim, start []float64
	handed := 0
	us := func(d int64) float64 { return float64(d) / 1e3 }
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		time.Sleep(gap)
		b.StartTimer()
		enq, t0, end := pickup()
		woken, sent, got := marks[traceWoken].Load(), marks[traceClaim].Load(), marks[traceClaimed].Load()
		total = append(total, us(end.Sub(t0).Nanoseconds()))
		enqueue = append(enqueue, us(enq.Sub(t0).Nanoseconds()))
		if h := marks[traceHanded].Load(); h != 0 && h <= end.UnixNano() {
			handed++
			wake = append(wake, us(h-t0.UnixNano()))
			start = append(start, us(end.UnixNano()-h))
			continue
		}
		if woken == 0 || sent < woken || got < sent {
			continue // woken by another path (a claim already in flight): no split
		}
		wake = append(wake, us(woken-t0.UnixNano()))
		loop = append(loop, us(sent-woken))
		claim = append(claim, us(got-sent))
		start = append(start, us(end.UnixNano()-got))
	}
	b.StopTimer()
	for _, m := range []struct {
		unit string
		v    []float64
	}{{"enqueue-us", enqueue}, {"wake-us", wake}, {"loop-us", loop}, {"claim-us", claim}, {"start-us", start}} {
		b.ReportMetric(quantile(m.v, 0.5), m.unit)
	}
	b.ReportMetric(100*float64(handed)/float64(max(len(total), 1)), "handed-%")
	b.ReportMetric(quantile(total, 0.5), "p50-us")
	b.ReportMetric(quantile(total, 0.99), "p99-us")
}

// quantile is the q-quantile of v (nearest rank); 0 for no samples.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[min(int(q*float64(len(v))), len(v)-1)]
}
