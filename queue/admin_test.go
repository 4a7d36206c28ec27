package queue

import (
	"errors"
	"testing"
	"time"
)

func TestStatsCountsEveryState(t *testing.T) {
	c := setup(t, Config{})
	for range 3 {
		mustEnqueue(t, c, "a")
	}
	mustEnqueue(t, c, "a", Delay(time.Hour))
	mustEnqueue(t, c, "a", On("other"))
	j := claimOne(t, c, "default", time.Minute, "w")
	c.Ack(ctx, j, nil)
	j = claimOne(t, c, "default", time.Minute, "w")
	c.Fail(ctx, j, "x", time.Hour)
	claimOne(t, c, "default", time.Minute, "w") // stays active
	mustEnqueue(t, c, "a", MaxRetry(0))
	j = claimOne(t, c, "default", time.Minute, "w")
	c.Fail(ctx, j, "x", 0) // no retries left: dead
	if err := c.Pause(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	stats, err := c.Stats(ctx)
	if err != nil || len(stats) != 2 {
		t.Fatalf("Stats() = %+v, %v", stats, err)
	}
	want := QueueStats{Name: "default", Ready: 0, Scheduled: 1, Active: 1, Retry: 1, Dead: 1, Done: 1,
		ProcessedToday: 3, FailedToday: 2}
	if stats[0] != want {
		t.Errorf("Stats()[0] = %+v\nwant        %+v", stats[0], want)
	}
	if o := stats[1]; o.Name != "other" || o.Ready != 1 || !o.Paused {
		t.Errorf("Stats()[1] = %+v", o)
	}
}

func TestDoneSetIsCapped(t *testing.T) {
	c := setup(t, Config{DoneMax: 3})
	var ids []string
	for range 5 {
		ids = append(ids, mustEnqueue(t, c, "a"))
	}
	for range 5 {
		c.Ack(ctx, claimOne(t, c, "default", time.Minute, "w"), nil)
	}
	done, _ := c.List(ctx, "default", StateDone, 0, 10)
	if len(done) != 3 {
		t.Fatalf("List(done) = %v, want 3 (DoneMax)", jobIDs(done))
	}
	kept := map[string]bool{}
	for _, j := range done {
		kept[j.ID] = true
	}
	// Acks within one millisecond tie on score, so which 3 stay is not fixed; the 2
	// dropped must be gone entirely.
	for _, id := range ids {
		if _, err := c.Get(ctx, "default", id); !kept[id] && !errors.Is(err, ErrNotFound) {
			t.Errorf("trimmed done job %s still readable: %v", id, err)
		}
	}
}

func TestRetry(t *testing.T) {
	c := setup(t, Config{})
	dead := mustEnqueue(t, c, "a", MaxRetry(0))
	j := claimOne(t, c, "default", time.Minute, "w")
	c.Fail(ctx, j, "boom", 0)
	if err := c.Retry(ctx, "default", dead); err != nil {
		t.Fatalf("Retry(dead) err = %v", err)
	}
	got, _ := c.Get(ctx, "default", dead)
	if got.State != StateReady || got.Attempt != 0 || got.LastError != "boom" {
		t.Errorf("retried dead job = %s attempt %d last_error %q", got.State, got.Attempt, got.LastError)
	}
	if ttl := c.rdb.PTTL(ctx, c.keys.queue("default").job(dead)).Val(); ttl > 0 {
		t.Errorf("retried job still expires in %s", ttl)
	}
	later := mustEnqueue(t, c, "a", Delay(time.Hour))
	if err := c.Retry(ctx, "default", later); err != nil {
		t.Errorf("Retry(scheduled) err = %v", err)
	}
	if err := c.Retry(ctx, "default", later); !errors.Is(err, ErrState) {
		t.Errorf("Retry(ready) err = %v, want ErrState", err)
	}
	if err := c.Retry(ctx, "default", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Retry(unknown) err = %v, want ErrNotFound", err)
	}
	j = claimOne(t, c, "default", time.Minute, "w")
	if err := c.Retry(ctx, "default", j.ID); !errors.Is(err, ErrState) {
		t.Errorf("Retry(active) err = %v, want ErrState", err)
	}
}

func TestRetryAllDead(t *testing.T) {
	c := setup(t, Config{})
	for range 5 {
		mustEnqueue(t, c, "a", MaxRetry(0))
	}
	for range 5 {
		c.Fail(ctx, claimOne(t, c, "default", time.Minute, "w"), "x", 0)
	}
	n, err := c.RetryAllDead(ctx, "default")
	if err != nil || n != 5 {
		t.Fatalf("RetryAllDead() = %d, %v; want 5", n, err)
	}
	if got := c.rdb.LLen(ctx, c.keys.queue("default").ready).Val(); got != 5 {
		t.Errorf("ready = %d, want 5", got)
	}
}

func TestCancel(t *testing.T) {
	c := setup(t, Config{})
	ready := mustEnqueue(t, c, "a", Unique(time.Hour))
	sched := mustEnqueue(t, c, "a", Delay(time.Hour))
	for _, id := range []string{ready, sched} {
		state, err := c.Cancel(ctx, "default", id)
		if err != nil || state != StateDead {
			t.Fatalf("Cancel(%s) = %s, %v; want dead", id, state, err)
		}
		got, _ := c.Get(ctx, "default", id)
		if got.State != StateDead || got.LastError != "cancelled by operator" {
			t.Errorf("cancelled job = %s %q", got.State, got.LastError)
		}
	}
	if _, err := c.Enqueue(ctx, "a", []byte(`{"n":1}`), Unique(time.Hour)); err != nil {
		t.Errorf("unique key not released by cancel: %v", err)
	}
	active := claimOne(t, c, "default", time.Minute, "w")
	state, err := c.Cancel(ctx, "default", active.ID)
	if err != nil || state != StateActive {
		t.Fatalf("Cancel(active) = %s, %v; want active (cancelling)", state, err)
	}
	_, cancelled, _ := c.Heartbeat(ctx, "default", time.Minute, []*Job{active})
	if len(cancelled) != 1 {
		t.Fatalf("Heartbeat() cancelled = %v, want [%s]", cancelled, active.ID)
	}
	if state, _ := c.Fail(ctx, active, "context canceled", time.Second); state != StateDead {
		t.Errorf("cancelled job's failure went to %s, want dead", state)
	}
	if _, err := c.Cancel(ctx, "default", active.ID); !errors.Is(err, ErrState) {
		t.Errorf("Cancel(dead) err = %v, want ErrState", err)
	}
	if _, err := c.Cancel(ctx, "default", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel(unknown) err = %v, want ErrNotFound", err)
	}
}

func TestPauseResume(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a")
	c.Pause(ctx, "default")
	if jobs, _ := c.Claim(ctx, "default", 1, time.Minute, "w"); len(jobs) != 0 {
		t.Fatal("claimed from a paused queue")
	}
	c.rdb.Del(ctx, c.keys.queue("default").wake)
	if err := c.Resume(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if q, token, _ := c.Wait(ctx, []string{"default"}, 100*time.Millisecond); q != "default" || token != WakeReady {
		t.Errorf("Resume() woke nobody: %q %q", q, token)
	}
	claimOne(t, c, "default", time.Minute, "w")
}

func TestPurge(t *testing.T) {
	c := setup(t, Config{})
	batch := make([]BatchJob, 2500)
	for i := range batch {
		batch[i] = BatchJob{Type: "a"}
	}
	batch[0].Options = []Option{Unique(time.Hour), UniqueKey("u")}
	if _, err := c.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	n, err := c.Purge(ctx, "default", StateReady)
	if err != nil || n != 2500 {
		t.Fatalf("Purge(ready) = %d, %v; want 2500", n, err)
	}
	if keys := c.rdb.Keys(ctx, c.cfg.Prefix+":{default}:job:*").Val(); len(keys) != 0 {
		t.Errorf("%d job hashes left after purge", len(keys))
	}
	if _, err := c.Enqueue(ctx, "a", nil, Unique(time.Hour), UniqueKey("u")); err != nil {
		t.Errorf("purge kept the unique key: %v", err)
	}
	if _, err := c.Purge(ctx, "default", StateActive); !errors.Is(err, ErrInvalid) {
		t.Errorf("Purge(active) err = %v, want ErrInvalid", err)
	}
}
