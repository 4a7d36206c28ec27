package proto

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The buckets as HistBuckets defines them: bucket k (0 < k < 48) holds the durations
// above bucket k-1's upper bound up to its own, 2^(k/2) ms rounded to the microsecond;
// bucket 0 up to 1 ms, bucket 48 the rest. Checked at every bound, a nanosecond either
// side of it, and at random durations up to a day.
func TestHistBucketsHoldTheirDurations(t *testing.T) {
	for k := range HistBuckets - 1 {
		exact := math.Pow(2, float64(k)/2) * float64(time.Millisecond)
		if diff := math.Abs(float64(HistUpper(k)) - exact); diff > float64(time.Microsecond)/2 || HistUpper(k)%time.Microsecond != 0 {
			t.Errorf("HistUpper(%d) = %v, want 2^(%d/2) ms = %v to the microsecond", k, HistUpper(k), k, time.Duration(exact))
		}
	}
	if HistUpper(HistBuckets-1) != HistUpper(HistBuckets-2) || HistUpper(-1) != HistUpper(0) {
		t.Errorf("HistUpper outside 0-47 = %v, %v; want the nearest bucket's", HistUpper(-1), HistUpper(HistBuckets-1))
	}
	check := func(d time.Duration) {
		t.Helper()
		k := HistBucket(d)
		switch {
		case k < 0 || k >= HistBuckets:
			t.Fatalf("HistBucket(%v) = %d, want 0-%d", d, k, HistBuckets-1)
		case k < HistBuckets-1 && d > HistUpper(k):
			t.Errorf("HistBucket(%v) = %d, whose upper bound %v is below it", d, k, HistUpper(k))
		case k > 0 && d <= HistUpper(k-1):
			t.Errorf("HistBucket(%v) = %d, but bucket %d's upper bound %v holds it", d, k, k-1, HistUpper(k-1))
		}
	}
	for _, d := range []time.Duration{-time.Second, 0, 1, time.Millisecond, 24 * time.Hour, math.MaxInt64} {
		check(d)
	}
	for k := range HistBuckets - 1 {
		for _, d := range []time.Duration{HistUpper(k) - 1, HistUpper(k), HistUpper(k) + 1} {
			check(d)
		}
		if got := HistBucket(HistUpper(k)); got != k {
			t.Errorf("HistBucket(%v) = %d, want %d (its upper bound)", HistUpper(k), got, k)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		check(time.Duration(r.Int64N(int64(24 * time.Hour))))
	}
}
