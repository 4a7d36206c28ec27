package queue

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

func TestUniqueRejectsTheSameJob(t *testing.T) {
	c := setup(t, Config{})
	first := mustEnqueue(t, c, "digest", Unique(time.Hour))
	id, err := c.Enqueue(ctx, "digest", []byte(`{"n":1}`), Unique(time.Hour))
	if !errors.Is(err, ErrDuplicate) || id != first {
		t.Fatalf("second Enqueue() = %q, %v; want %q, ErrDuplicate", id, err, first)
	}
	if _, err := c.Enqueue(ctx, "digest", []byte(`other`), Unique(time.Hour)); err != nil {
		t.Errorf("other payload: err = %v, want a new job", err)
	}
	if _, err := c.Enqueue(ctx, "digest", []byte(`{"n":1}`), Unique(time.Hour), On("elsewhere")); err != nil {
		t.Errorf("other queue: err = %v, want a new job (unique keys are per queue)", err)
	}
	if _, err := c.Enqueue(ctx, "digest", []byte(`{"n":1}`)); err != nil {
		t.Errorf("not unique: err = %v, want a new job", err)
	}
}

func TestUniqueKeyReleasedWhenJobFinishes(t *testing.T) {
	c := setup(t, Config{})
	first := mustEnqueue(t, c, "a", Unique(time.Hour), UniqueKey("invoice:42"))
	if _, err := c.Enqueue(ctx, "b", nil, Unique(time.Hour), UniqueKey("invoice:42")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("same key, other type: err = %v, want ErrDuplicate", err)
	}
	j := claimOne(t, c, "default", time.Second, "w")
	if j.ID != first {
		t.Fatalf("claimed %s", j.ID)
	}
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	second, err := c.Enqueue(ctx, "a", nil, Unique(time.Hour), UniqueKey("invoice:42"))
	if err != nil {
		t.Fatalf("after done: err = %v, want the key released", err)
	}
	j = claimOne(t, c, "default", time.Second, "w")
	if _, err := c.broker().Fail(ctx, j, "x", proto.NoRetry); err != nil || j.ID != second {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, "a", nil, Unique(time.Hour), UniqueKey("invoice:42")); err != nil {
		t.Fatalf("after dead: err = %v, want the key released", err)
	}
}

func TestUniqueUntilExpiryKeepsKey(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a", Unique(300*time.Millisecond), UniqueUntilExpiry())
	j := claimOne(t, c, "default", time.Second, "w")
	c.broker().Ack(ctx, j, nil)
	if _, err := c.Enqueue(ctx, "a", []byte(`{"n":1}`), Unique(time.Hour), UniqueUntilExpiry()); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("after done: err = %v, want ErrDuplicate until the TTL", err)
	}
	eventually(t, 2*time.Second, "unique key expired", func() bool {
		_, err := c.Enqueue(ctx, "a", []byte(`{"n":1}`), Unique(time.Hour))
		return err == nil
	})
}

func TestUniqueIsAtomicUnderConcurrency(t *testing.T) {
	c := setup(t, Config{})
	var wg sync.WaitGroup
	ids := make([]string, 50)
	errs := make([]error, 50)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = c.Enqueue(ctx, "race", []byte("same"), Unique(time.Minute))
		}()
	}
	wg.Wait()
	winners := 0
	var winner string
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
			winner = ids[i]
		case !errors.Is(err, ErrDuplicate):
			t.Fatalf("Enqueue() err = %v", err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d enqueues won, want exactly 1", winners)
	}
	for i := range ids {
		if ids[i] != winner {
			t.Errorf("enqueue %d got ID %q, want the winner's %q", i, ids[i], winner)
		}
	}
	if n := c.rdb.LLen(ctx, c.keys.queue("default").ready).Val(); n != 1 {
		t.Errorf("ready has %d jobs, want 1", n)
	}
}

func TestUniqueInBatch(t *testing.T) {
	c := setup(t, Config{})
	res, err := c.EnqueueBatch(ctx, []BatchJob{
		{Type: "a", Payload: []byte("1"), Options: []Option{Unique(time.Hour)}},
		{Type: "a", Payload: []byte("1"), Options: []Option{Unique(time.Hour)}},
	})
	if err != nil || res[0].Err != nil || !errors.Is(res[1].Err, ErrDuplicate) || res[1].ID != res[0].ID {
		t.Fatalf("EnqueueBatch() = %+v, %v; want the second a duplicate of the first", res, err)
	}
}

func TestUniqueAndExclusiveBadInput(t *testing.T) {
	c := setup(t, Config{})
	for _, opts := range [][]Option{
		{UniqueKey("k")},
		{UniqueUntilExpiry()},
		{Unique(0)},
		{Unique(time.Hour), UniqueKey("has space")},
		{Exclusive("has\nnewline")},
	} {
		if _, err := c.Enqueue(ctx, "a", nil, opts...); !errors.Is(err, ErrInvalid) {
			t.Errorf("Enqueue(%d options) err = %v, want ErrInvalid", len(opts), err)
		}
	}
}

func TestExclusiveIsStoredAndHandBackDelays(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "report", Exclusive(""))
	j := claimOne(t, c, "default", time.Second, "w")
	if j.Exclusive != "report" {
		t.Fatalf("Exclusive = %q, want the job type", j.Exclusive)
	}
	if err := c.broker().HandBack(ctx, j, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, _ := c.Get(ctx, "default", id)
	if got.State != StateScheduled || got.Attempt != 0 || time.Until(got.RunAt) < 59*time.Minute {
		t.Errorf("deferred job: state %s attempt %d run_at in %s", got.State, got.Attempt, time.Until(got.RunAt))
	}
}
