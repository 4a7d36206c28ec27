package queue

import (
	"errors"
	"math"
	"testing"
	"time"
)

// A positive timeout under 1ms used to be stored as timeout_ms 0, which reads back as the
// 30 min default; a max retry near MaxInt made max_retry+1 overflow. Both are refused,
// and nothing is written.
func TestTimeoutAndMaxRetryLimits(t *testing.T) {
	c := setup(t, Config{})
	for _, tc := range []struct {
		name string
		opt  Option
	}{
		{"timeout 500us", Timeout(500 * time.Microsecond)},
		{"timeout 1ns", Timeout(time.Nanosecond)},
		{"max retry MaxInt", MaxRetry(math.MaxInt)},
		{"max retry over the limit", MaxRetry(MaxRetryLimit + 1)},
	} {
		if _, err := c.Enqueue(ctx, "a", nil, tc.opt); !errors.Is(err, ErrInvalid) {
			t.Errorf("Enqueue(%s) err = %v, want ErrInvalid", tc.name, err)
		}
		if err := c.Check(BatchJob{Type: "a", Options: []Option{tc.opt}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%s) err = %v, want ErrInvalid", tc.name, err)
		}
	}
	if n := c.rdb.LLen(ctx, c.keys.queue("default").ready).Val(); n != 0 {
		t.Errorf("ready holds %d jobs after refused enqueues, want 0", n)
	}
	id, err := c.Enqueue(ctx, "a", nil, Timeout(MinTimeout), MaxRetry(MaxRetryLimit))
	if err != nil {
		t.Fatalf("Enqueue(Timeout(MinTimeout), MaxRetry(MaxRetryLimit)) err = %v", err)
	}
	j, err := c.Get(ctx, "default", id)
	if err != nil || j.Timeout != time.Millisecond || j.MaxRetry != MaxRetryLimit {
		t.Errorf("job = timeout %v, max retry %d, %v; want 1ms, %d", j.Timeout, j.MaxRetry, err, MaxRetryLimit)
	}
}
