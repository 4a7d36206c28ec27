package harness

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestSummary(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		n       int
		elapsed time.Duration
		samples []time.Duration
		want    Record
	}{
		{0, 0, nil, Record{}},
		{10, 2 * time.Second, ms(4, 1, 3, 2), Record{JobsPerS: 5, P50Ms: 2, P99Ms: 4, MaxMs: 4}},
		{0, 0, []time.Duration{1500 * time.Microsecond, -time.Millisecond}, Record{P50Ms: -1, P99Ms: 1.5, MaxMs: 1.5}},
	} {
		if got := Summary(tc.n, tc.elapsed, tc.samples); got != tc.want {
			t.Errorf("Summary(%d, %v, ...) = %+v, want %+v", tc.n, tc.elapsed, got, tc.want)
		}
	}
}

func TestParallel(t *testing.T) {
	var sum atomic.Int64
	if err := Parallel(4, 100, func(i int) error { sum.Add(int64(i)); return nil }); err != nil || sum.Load() != 4950 {
		t.Errorf("Parallel() = %v, sum %d; want nil, 4950", err, sum.Load())
	}
	boom := errors.New("boom")
	var ran atomic.Int64
	err := Parallel(2, 1000, func(i int) error {
		ran.Add(1)
		if i == 3 {
			return boom
		}
		time.Sleep(time.Millisecond) // so the error is seen long before the tasks run out
		return nil
	})
	if !errors.Is(err, boom) || ran.Load() == 1000 {
		t.Errorf("Parallel() = %v after %d tasks; want boom, and the rest not run", err, ran.Load())
	}
}
