package bench

import (
	"math"
	"slices"
	"time"
)

// summary fills a Record's measures from n jobs done in elapsed (0: no throughput) and
// per-sample durations, which it sorts.
func summary(n int, elapsed time.Duration, samples []time.Duration) Record {
	var rec Record
	if elapsed > 0 {
		rec.JobsPerS = math.Round(float64(n)/elapsed.Seconds()*10) / 10
	}
	slices.Sort(samples)
	rec.P50Ms = millis(percentile(samples, 50))
	rec.P99Ms = millis(percentile(samples, 99))
	if len(samples) > 0 {
		rec.MaxMs = millis(samples[len(samples)-1])
	}
	return rec
}

// percentile returns the p-th percentile of sorted samples by nearest rank: the smallest
// sample that at least p% of the samples are less than or equal to. Zero when empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// millis converts d to milliseconds, rounded to the microsecond.
func millis(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}
