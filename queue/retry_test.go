package queue

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A job cancelled while it waited for its dependencies, retried, waits again for the ones
// still pending (in its queue and in another), and becomes ready only when they end; one
// whose dependencies all ended while it was dead is ready at once.
func TestRetryOfAJobThatDiedWaitingWaitsForItsPendingDependencies(t *testing.T) {
	c := setup(t, Config{})
	parent := mustEnqueue(t, c, "p", Delay(time.Hour))
	other := mustEnqueue(t, c, "o", On("other"))
	child := mustEnqueue(t, c, "c", After(parent), AfterJob("other", other))
	if st, err := c.Cancel(ctx, "default", child); err != nil || st != StateDead {
		t.Fatalf("Cancel(waiting child) = %s, %v; want dead", st, err)
	}
	if err := c.Retry(ctx, "default", child); err != nil {
		t.Fatalf("Retry(child) err = %v", err)
	}
	j := mustState(t, c, "default", child, StateWaiting)
	// Its event says it went back to waiting, not to ready.
	last, err := c.rdb.XRevRangeN(ctx, c.keys.queue("default").events, "+", "-", 1).Result()
	if err != nil || len(last) != 1 ||
		last[0].Values["event"] != "requeued\t"+child+"\tc\t0\t\twaiting on its dependencies" {
		t.Errorf("the retry's event = %v, %v; want requeued with 'waiting on its dependencies'", last, err)
	}
	deps, err := c.Dependencies(ctx, j)
	if err != nil || len(deps) != 2 || !deps[0].Pending || !deps[1].Pending {
		t.Fatalf("Dependencies() after Retry = %+v, %v; want both pending", deps, err)
	}
	if n, _ := c.rdb.ZScore(ctx, c.keys.queue("default").waiting, child).Result(); n == 0 {
		t.Errorf("retried child is not in the waiting set")
	}
	if err := c.Retry(ctx, "default", parent); err != nil { // scheduled -> ready
		t.Fatal(err)
	}
	if err := c.broker().Ack(ctx, claimID(t, c, "default", parent, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "default", child, StateWaiting) // other's job is pending still
	if err := c.broker().Ack(ctx, claimID(t, c, "other", other, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	deliverAll(t, c, "other")
	mustState(t, c, "default", child, StateReady)

	// Dependencies that end while the dependent is dead are counted: its retry is ready.
	if err := c.broker().Ack(ctx, claimID(t, c, "default", child, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	p2 := mustEnqueue(t, c, "p")
	c2 := mustEnqueue(t, c, "c", After(p2))
	if _, err := c.Cancel(ctx, "default", c2); err != nil {
		t.Fatal(err)
	}
	if err := c.broker().Ack(ctx, claimID(t, c, "default", p2, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "default", c2, StateDead)
	if err := c.Retry(ctx, "default", c2); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "default", c2, StateReady)
}

// A dead unique job released its key, so another job may hold it now: Retry then refuses
// (ErrDuplicate naming the holder) and leaves the job dead, as Enqueue refuses a second
// job with the key. When the key is free, Retry takes it back for the job's unique TTL,
// so a new job with the key is a duplicate again while the retried one lives.
func TestRetryOfADeadUniqueJobTakesItsKeyBack(t *testing.T) {
	c := setup(t, Config{})
	first := mustEnqueue(t, c, "u", Unique(time.Hour), UniqueKey("k"))
	if _, err := c.Cancel(ctx, "default", first); err != nil {
		t.Fatal(err)
	}
	second := mustEnqueue(t, c, "u", Unique(time.Hour), UniqueKey("k")) // the key was released: accepted
	err := c.Retry(ctx, "default", first)
	if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), second) {
		t.Fatalf("Retry(dead unique job, key held by %s) err = %v, want ErrDuplicate naming the holder", second, err)
	}
	mustState(t, c, "default", first, StateDead)
	plain := mustEnqueue(t, c, "p")
	if _, err := c.Cancel(ctx, "default", plain); err != nil {
		t.Fatal(err)
	}
	n, err := c.RetryAllDead(ctx, "default")
	if n != 1 || !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), first) {
		t.Errorf("RetryAllDead() = %d, %v; want 1 (the plain job) and ErrDuplicate naming %s", n, err, first)
	}
	mustState(t, c, "default", first, StateDead)
	mustState(t, c, "default", plain, StateReady)

	if err := c.Delete(ctx, "default", second); err != nil { // frees the key
		t.Fatal(err)
	}
	if err := c.Retry(ctx, "default", first); err != nil {
		t.Fatalf("Retry(dead unique job, key free) err = %v", err)
	}
	mustState(t, c, "default", first, StateReady)
	holder, err := c.Enqueue(ctx, "u", nil, Unique(time.Hour), UniqueKey("k"))
	if !errors.Is(err, ErrDuplicate) || holder != first {
		t.Errorf("Enqueue(same unique job) after the retry = %s, %v; want ErrDuplicate held by %s", holder, err, first)
	}
	ttl, _ := c.rdb.PTTL(ctx, c.queueKeys("default").unique("k")).Result()
	if ttl < 59*time.Minute || ttl > time.Hour {
		t.Errorf("unique key TTL after the retry = %s, want the job's unique TTL, 1h", ttl)
	}
}
