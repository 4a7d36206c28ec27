package queue

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

// A worker that lost its lease cannot write progress: the heartbeat that carries it is
// fenced by the token like the renewal, and reports the token lost.
func TestHeartbeatProgressIsFencedByTheLease(t *testing.T) {
	c := setup(t, Config{})
	b := c.broker()
	if _, err := c.Enqueue(ctx, "long", nil); err != nil {
		t.Fatal(err)
	}
	first, err := b.Claim(ctx, "default", 1, 100*time.Millisecond, "w1")
	if err != nil || len(first) != 1 {
		t.Fatalf("Claim() = %v, %v", first, err)
	}
	j := first[0]
	lost, _, err := b.HeartbeatProgress(ctx, "default", 100*time.Millisecond, first, []*proto.Progress{{Percent: 10, Message: "w1 started"}})
	if err != nil || len(lost) != 0 {
		t.Fatalf("HeartbeatProgress(holder) lost = %v, %v; want none", lost, err)
	}
	got, err := c.Get(ctx, "default", j.ID)
	if err != nil || got.Progress != 10 || got.ProgressMessage != "w1 started" {
		t.Fatalf("after w1's progress: %+v, %v; want 10%% w1 started", got, err)
	}
	if d := time.Since(got.ProgressAt); d < -time.Second || d > 5*time.Second {
		t.Errorf("ProgressAt = %v, %v from now; want Redis's now", got.ProgressAt, d)
	}

	// w1's lease expires, the job is reaped and claimed by w2.
	eventually(t, 5*time.Second, "the lease reaped", func() bool {
		n, err := b.Reap(ctx, "default")
		return err == nil && n == 1
	})
	second, err := b.Claim(ctx, "default", 1, time.Minute, "w2")
	if err != nil || len(second) != 1 {
		t.Fatalf("Claim() by w2 = %v, %v", second, err)
	}
	lost, _, err = b.HeartbeatProgress(ctx, "default", time.Minute, first, []*proto.Progress{{Percent: 90, Message: "w1 late"}})
	if err != nil || len(lost) != 1 || lost[0] != j.Lease {
		t.Errorf("HeartbeatProgress(lost lease) lost = %v, %v; want [%s]", lost, err, j.Lease)
	}
	if got, _ := c.Get(ctx, "default", j.ID); got.Progress != 10 || got.ProgressMessage != "w1 started" {
		t.Errorf("after the lost lease's progress: %d%% %q, want w1's 10%% unchanged", got.Progress, got.ProgressMessage)
	}
	long := string(make([]byte, 300))
	lost, _, err = b.HeartbeatProgress(ctx, "default", time.Minute, second, []*proto.Progress{{Percent: 150, Message: long}})
	if err != nil || len(lost) != 0 {
		t.Fatalf("HeartbeatProgress(w2) lost = %v, %v; want none", lost, err)
	}
	got, _ = c.Get(ctx, "default", j.ID)
	if got.Progress != 100 || len(got.ProgressMessage) != proto.MaxProgressMessage {
		t.Errorf("w2's progress = %d%%, message of %d bytes; want 100 (clamped), %d bytes (cut)",
			got.Progress, len(got.ProgressMessage), proto.MaxProgressMessage)
	}
	if _, _, err := b.HeartbeatProgress(ctx, "default", time.Minute, second, []*proto.Progress{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("HeartbeatProgress(progress of another length) err = %v, want ErrInvalid", err)
	}
}

// RecordMetrics writes each sample to its minute's and its hour's hash with their TTLs;
// History reads it back with the percentiles of the right buckets.
func TestRecordMetricsAndHistory(t *testing.T) {
	c := setup(t, Config{})
	b := c.broker()
	now, err := c.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	minute := now.UnixMilli() / 60_000
	s := &proto.MetricsSample{Queue: "default", Type: "resize", Minute: minute, Processed: 20, Failed: 3}
	// Run times: 18 of 50 ms and 2 of 200 ms; waits: all 600 ms.
	s.Run[proto.HistBucket(50*time.Millisecond)] = 18
	s.Run[proto.HistBucket(200*time.Millisecond)] = 2
	s.Wait[proto.HistBucket(600*time.Millisecond)] = 20
	other := &proto.MetricsSample{Queue: "default", Type: "email", Minute: minute - 1, Processed: 5}
	other.Run[0], other.Wait[0] = 5, 5
	stale := &proto.MetricsSample{Queue: "default", Type: "email", Minute: minute - 3*24*60, Processed: 7}
	if retry, err := b.RecordMetrics(ctx, []*proto.MetricsSample{s, other, stale}); err != nil || retry != nil {
		t.Fatalf("RecordMetrics() = %v, %v", retry, err)
	}
	qk := c.keys.queue("default")
	if ttl := c.rdb.PTTL(ctx, qk.metricsMinute(minute)).Val(); ttl < 48*time.Hour || ttl > 48*time.Hour+time.Minute {
		t.Errorf("PTTL(minute key) = %v, want 48h to 48h1m (the minute's end + 48h)", ttl)
	}
	hour := minute / 60
	if ttl := c.rdb.PTTL(ctx, qk.metricsHour(hour)).Val(); ttl < 30*24*time.Hour || ttl > 30*24*time.Hour+time.Hour {
		t.Errorf("PTTL(hour key) = %v, want 30 days to 30 days 1h", ttl)
	}
	if n := c.rdb.Exists(ctx, qk.metricsMinute(stale.Minute)).Val(); n != 0 {
		t.Errorf("a minute past its 48h retention was written (EXISTS = %d), want skipped", n)
	}

	h, err := c.History(ctx, "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if h.Step != time.Minute || len(h.Points) != 60 {
		t.Fatalf("History(1h) step %v, %d points; want 1m, 60", h.Step, len(h.Points))
	}
	last := h.Points[59]
	if last.Start.UnixMilli() != minute*60_000 {
		t.Errorf("last point starts %v, want the current minute %v", last.Start, time.UnixMilli(minute*60_000))
	}
	if last.Processed != 20 || last.Failed != 3 || h.Points[58].Processed != 5 {
		t.Errorf("points = %+v / %+v; want 20 processed, 3 failed now and 5 a minute ago", h.Points[58].HistoryStats, last.HistoryStats)
	}
	if want := proto.HistUpper(proto.HistBucket(50 * time.Millisecond)); last.RunP50 != want {
		t.Errorf("RunP50 = %v, want %v (the 50ms bucket's upper bound)", last.RunP50, want)
	}
	if want := proto.HistUpper(proto.HistBucket(200 * time.Millisecond)); last.RunP95 != want {
		t.Errorf("RunP95 = %v, want %v (the 200ms bucket: 19th of 20)", last.RunP95, want)
	}
	if want := proto.HistUpper(proto.HistBucket(600 * time.Millisecond)); last.WaitP50 != want || last.WaitP95 != want {
		t.Errorf("Wait p50/p95 = %v/%v, want %v", last.WaitP50, last.WaitP95, want)
	}
	if r := last.Types["resize"]; r.Processed != 20 || last.Types["email"].Processed != 0 || h.Points[58].Types["email"].Processed != 5 {
		t.Errorf("types = %+v, %+v; want resize 20 now, email 5 a minute ago", last.Types, h.Points[58].Types)
	}
	if h.Total.Processed != 25 || h.Total.Failed != 3 {
		t.Errorf("Total = %+v, want 25 processed, 3 failed", h.Total)
	}
	// The hour buckets hold the same counts.
	day, err := c.History(ctx, "default", 24*time.Hour)
	if err != nil || day.Step != time.Hour || len(day.Points) != 24 || day.Total.Processed != 25 {
		t.Errorf("History(24h) = step %v, %d points, total %+v, %v; want 1h, 24, 25 processed", day.Step, len(day.Points), day.Total, err)
	}
	for _, span := range []time.Duration{time.Second, 31 * 24 * time.Hour} {
		if _, err := c.History(ctx, "default", span); !errors.Is(err, ErrInvalid) {
			t.Errorf("History(%v) err = %v, want ErrInvalid", span, err)
		}
	}
}

func TestHistBucketBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {time.Millisecond, 0}, {time.Millisecond + 1, 1}, {1414 * time.Microsecond, 1},
		{2 * time.Millisecond, 2}, {2*time.Millisecond + time.Microsecond, 3}, {4 * time.Millisecond, 4},
		{time.Second, 20}, {24 * time.Hour, proto.HistBuckets - 1},
	} {
		if got := proto.HistBucket(tc.d); got != tc.want {
			t.Errorf("HistBucket(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	for k := 1; k < proto.HistBuckets-1; k++ {
		up := proto.HistUpper(k)
		if proto.HistBucket(up) != k || proto.HistBucket(up+time.Microsecond) != k+1 {
			t.Errorf("bucket %d: upper bound %v in bucket %d, just above it in %d", k, up,
				proto.HistBucket(up), proto.HistBucket(up+time.Microsecond))
		}
		if ratio := float64(up) / float64(proto.HistUpper(k-1)); math.Abs(ratio-math.Sqrt2) > 0.01 {
			t.Errorf("bucket %d / %d = %.3f, want sqrt 2", k, k-1, ratio)
		}
	}
}
