package queue

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
)

func TestBlockForRoundsUpToWholeSeconds(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, time.Second}, {time.Millisecond, time.Second}, {200 * time.Millisecond, time.Second},
		{time.Second, time.Second}, {time.Second + time.Nanosecond, 2 * time.Second},
		{2500 * time.Millisecond, 3 * time.Second},
	} {
		if got := blockFor(tc.in); got != tc.want {
			t.Errorf("blockFor(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// A client whose ReadTimeout is under the block time still waits: the BLPOP's read
// deadline is extended by the block (go-redis's BLPop), so an idle worker's waits neither
// fail with an i/o timeout nor drop and redial their connection each time.
func TestWaitWithShortReadTimeout(t *testing.T) {
	t.Parallel()
	const readTimeout = 200 * time.Millisecond
	var rdb redis.UniversalClient
	switch base := redistest.Client(t).(type) {
	case *redis.ClusterClient:
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: base.Options().Addrs, ReadTimeout: readTimeout})
	case *redis.Client:
		rdb = redis.NewClient(&redis.Options{Addr: base.Options().Addr, ReadTimeout: readTimeout})
	}
	defer rdb.Close()
	c, err := NewClient(rdb, Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	sets := [][]string{{"default", "other"}}
	if c.clusterWait != nil { // one slot (one BLPOP), then the cluster waiter
		sets = [][]string{{"default"}, queuesOnDistinctNodes(t, c, 3)}
	}
	for _, queues := range sets {
		wait := func() {
			t.Helper()
			start := time.Now()
			q, token, err := c.broker().Wait(ctx, queues, time.Second)
			if err != nil || q != "" || token != "" {
				t.Fatalf("Wait(%v, 1s) with ReadTimeout %s = %q, %q, %v; want a timeout, no error", queues, readTimeout, q, token, err)
			}
			if d := time.Since(start); d < 900*time.Millisecond || d > 2500*time.Millisecond {
				t.Errorf("Wait(%v, 1s) took %s", queues, d)
			}
		}
		wait()
		before := rdb.PoolStats()
		for range 3 {
			wait()
		}
		after := rdb.PoolStats()
		if after.TotalConns > before.TotalConns {
			t.Errorf("Wait(%v): pool grew from %d to %d connections over 3 waits, want no growth",
				queues, before.TotalConns, after.TotalConns)
		}
		if c.clusterWait == nil && after.Misses > before.Misses {
			t.Errorf("Wait(%v): %d new connections dialed over 3 waits, want 0", queues, after.Misses-before.Misses)
		}
	}
}
