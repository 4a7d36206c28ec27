// Package harness is what the Go peer harnesses (../asynq, ../river) share: the JSON line
// they print, field for field jobs' bench.Record, the summary of a run's samples as jobs'
// internal/bench makes it, and a loop that runs tasks on a few goroutines. It is a module
// of its own, which theirs require through a replace directive, so that no harness
// depends on the jobs module nor the jobs module on any of them.
package harness

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Record is one run's JSON line, field for field jobs' bench.Record. Durations are in
// milliseconds.
type Record struct {
	System      string  `json:"system"`
	Mode        string  `json:"mode"`
	N           int     `json:"n"`
	C           int     `json:"c"`
	JobsPerS    float64 `json:"jobs_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	BytesPerJob float64 `json:"bytes_per_job,omitempty"`
}

// Summary is jobs' internal/bench summary: jobs_per_s = n / elapsed (0: no throughput),
// and nearest-rank percentiles of the samples (which it sorts), in ms rounded to the µs.
// The same arithmetic as jobs' keeps the figures of the two comparable to the last digit.
func Summary(n int, elapsed time.Duration, samples []time.Duration) Record {
	var r Record
	if elapsed > 0 {
		r.JobsPerS = math.Round(float64(n)/elapsed.Seconds()*10) / 10
	}
	slices.Sort(samples)
	pct := func(p float64) time.Duration {
		if len(samples) == 0 {
			return 0
		}
		rank := int(math.Ceil(p / 100 * float64(len(samples))))
		return samples[min(max(rank, 1), len(samples))-1]
	}
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }
	r.P50Ms, r.P99Ms = ms(pct(50)), ms(pct(99))
	if len(samples) > 0 {
		r.MaxMs = ms(samples[len(samples)-1])
	}
	return r
}

// Parallel runs fn for 0..tasks-1 on up to workers goroutines; the first error stops
// them and is returned.
func Parallel(workers, tasks int, fn func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
		bad   atomic.Bool
	)
	for range max(min(workers, tasks), 1) {
		wg.Go(func() {
			for !bad.Load() {
				i := int(next.Add(1) - 1)
				if i >= tasks {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					bad.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
