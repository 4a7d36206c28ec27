package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// After a worker ran N jobs, the history shows N processed (and the failures) in the
// minute they ended, with p50/p95 of run and wait times in the buckets of the jobs' own
// times.
func TestHistoryAfterRunningJobs(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	mux := NewMux()
	mux.HandleFunc("resize", func(ctx context.Context, j *queue.Job) error {
		switch string(j.Payload) {
		case "slow":
			time.Sleep(200 * time.Millisecond) // bucket (181ms, 256ms]
		case "fail":
			time.Sleep(50 * time.Millisecond)
			return SkipRetry(errors.New("bad image"))
		default:
			time.Sleep(50 * time.Millisecond) // bucket (45ms, 64ms]
		}
		return nil
	})
	var ids []string
	for i := range 20 {
		payload := "ok"
		switch {
		case i < 3:
			payload = "fail"
		case i >= 18:
			payload = "slow"
		}
		ids = append(ids, enqueue(t, c, "resize", payload))
	}
	// The jobs wait about 600ms before a worker starts: bucket (512ms, 724ms].
	time.Sleep(600 * time.Millisecond)
	startWorker(t, c, Config{Handler: mux, Concurrency: 20, HistoryInterval: 200 * time.Millisecond})
	var jobs []*queue.Job
	for i, id := range ids {
		want := queue.StateDone
		if i < 3 {
			want = queue.StateDead
		}
		jobs = append(jobs, waitState(t, c, "default", id, want, 5*time.Second))
	}
	var h *queue.History
	eventually(t, 3*time.Second, "20 processed in the history", func() bool {
		var err error
		h, err = c.History(ctx, "default", time.Hour)
		return err == nil && h.Total.Processed == 20
	})
	if h.Total.Failed != 3 {
		t.Errorf("failed = %d, want 3", h.Total.Failed)
	}
	first, last := jobs[0].StartedAt, jobs[0].FinishedAt
	waits := make([]time.Duration, len(jobs))
	for i, j := range jobs {
		first = minTime(first, j.StartedAt)
		last = maxTime(last, j.FinishedAt)
		due := j.RunAt
		if due.IsZero() {
			due = j.CreatedAt
		}
		waits[i] = j.StartedAt.Sub(due)
	}
	for _, p := range h.Points {
		if p.Processed > 0 && (p.Start.Before(first.Truncate(time.Minute)) || p.Start.After(last)) {
			t.Errorf("%d processed in the minute of %v, want them between the first start %v and the last end %v",
				p.Processed, p.Start, first, last)
		}
	}
	// A handler's run, as the worker times it, lies between its sleep and the job's
	// claim-to-ack span (Redis's clock, on this host): a loaded machine oversleeps.
	spans := make([]time.Duration, len(jobs))
	for i, j := range jobs {
		spans[i] = j.FinishedAt.Sub(j.StartedAt)
	}
	slices.Sort(spans)
	between := func(name string, got, least, most time.Duration) {
		t.Helper()
		lo, hi := proto.HistUpper(proto.HistBucket(least)), proto.HistUpper(proto.HistBucket(most))
		if got < lo || got > hi {
			t.Errorf("%s = %v, want the bucket of %v (its sleep) up to that of %v (its claim to ack)", name, got, least, most)
		}
	}
	between("run p50", h.Total.RunP50, 50*time.Millisecond, spans[9])
	between("run p95 (the 19th of 20 runs)", h.Total.RunP95, 200*time.Millisecond, spans[18])
	slices.Sort(waits)
	t.Logf("waits from %v to %v; history wait p50 %v p95 %v", waits[0], waits[len(waits)-1], h.Total.WaitP50, h.Total.WaitP95)
	if want := proto.HistUpper(proto.HistBucket(waits[9])); h.Total.WaitP50 != want {
		t.Errorf("wait p50 = %v, want %v (the bucket of the 10th wait, %v)", h.Total.WaitP50, want, waits[9])
	}
	if want := proto.HistUpper(proto.HistBucket(waits[18])); h.Total.WaitP95 != want {
		t.Errorf("wait p95 = %v, want %v (the bucket of the 19th wait, %v)", h.Total.WaitP95, want, waits[18])
	}
	var byType int64
	for _, p := range h.Points {
		byType += p.Types["resize"].Processed
	}
	if byType != 20 {
		t.Errorf("processed of type resize = %d, want 20", byType)
	}
}

// A worker flushes its history when it stops, not only every HistoryInterval.
func TestHistoryFlushedAtShutdown(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c, prefix := clientWithPrefix(t, rdb)
	mux := NewMux()
	mux.HandleFunc("t", func(context.Context, *queue.Job) error { return nil })
	stop := startWorker(t, c, Config{Handler: mux, HistoryInterval: time.Hour})
	for range 5 {
		waitState(t, c, "default", enqueue(t, c, "t", ""), queue.StateDone, 5*time.Second)
	}
	if h, err := c.History(ctx, "default", time.Hour); err != nil || h.Total.Processed != 0 {
		t.Fatalf("history before the hour = %+v, %v; want nothing flushed yet", h, err)
	}
	stop()
	h, err := c.History(ctx, "default", time.Hour)
	if err != nil || h.Total.Processed != 5 {
		t.Fatalf("history once the worker stopped = %+v, %v; want 5 processed", h, err)
	}
	// The keys it wrote expire: minutes after 48 hours, hours after 30 days. (Named, not
	// listed with KEYS, which sees one node of a cluster.)
	for _, p := range h.Points {
		if p.Processed == 0 {
			continue
		}
		minute := p.Start.Unix() / 60
		for key, most := range map[string]time.Duration{
			fmt.Sprintf("%s:{default}:metrics:m:%d", prefix, minute):    48*time.Hour + time.Minute,
			fmt.Sprintf("%s:{default}:metrics:h:%d", prefix, minute/60): 30*24*time.Hour + time.Hour,
		} {
			if ttl := rdb.PTTL(ctx, key).Val(); ttl < most-2*time.Hour || ttl > most {
				t.Errorf("PTTL(%s) = %v, want about %v", key, ttl, most)
			}
		}
	}
}

// A worker with the history off writes none.
func TestHistoryOff(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c, prefix := clientWithPrefix(t, rdb)
	mux := NewMux()
	mux.HandleFunc("t", func(context.Context, *queue.Job) error { return nil })
	stop := startWorker(t, c, Config{Handler: mux, HistoryInterval: -1})
	waitState(t, c, "default", enqueue(t, c, "t", ""), queue.StateDone, 5*time.Second)
	stop()
	if h, err := c.History(ctx, "default", time.Hour); err != nil || h.Total.Processed != 0 {
		t.Errorf("history with the history off = %+v, %v; want nothing", h.Total, err)
	}
	minute := time.Now().Unix() / 60 // the key a flush would have written, give or take a minute
	for _, m := range []int64{minute - 1, minute, minute + 1} {
		if n := rdb.Exists(ctx, fmt.Sprintf("%s:{default}:metrics:m:%d", prefix, m)).Val(); n != 0 {
			t.Errorf("metrics key of minute %d exists with the history off", m)
		}
	}
}
