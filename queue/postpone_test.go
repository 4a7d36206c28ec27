package queue

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

func TestPostpone(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "report")
	j := claimOne(t, c, "default", time.Minute, "w")
	qk := c.keys.queue("default")
	c.rdb.Del(ctx, qk.wake)
	before := time.Now()
	if err := c.broker().Postpone(ctx, j, time.Hour, "exclusive lock report held"); err != nil {
		t.Fatalf("Postpone() err = %v", err)
	}
	got, err := c.Get(ctx, "default", id)
	if err != nil || got.State != StateScheduled || got.Postponed != 1 || got.Attempt != 0 ||
		got.LastError != "exclusive lock report held" {
		t.Fatalf("postponed job = %+v, %v; want scheduled, postponed 1, attempt 0, the reason as last_error", got, err)
	}
	if d := got.RunAt.Sub(before); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("run_at in %s, want ~1h", d)
	}
	if c.rdb.ZScore(ctx, qk.active, id).Err() == nil || c.rdb.ZScore(ctx, qk.scheduled, id).Err() != nil {
		t.Errorf("postponed job: still in active, or not in scheduled")
	}
	if tokens := c.rdb.LRange(ctx, qk.wake, 0, -1).Val(); len(tokens) != 1 || tokens[0] != proto.WakeScheduled {
		t.Errorf("wake tokens = %v, want [%s]", tokens, proto.WakeScheduled)
	}
	// A resent call gets nil again and changes nothing.
	if err := c.broker().Postpone(ctx, j, time.Hour, "again"); err != nil {
		t.Errorf("resent Postpone() err = %v, want nil", err)
	}
	if got, _ := c.Get(ctx, "default", id); got.Postponed != 1 || got.LastError != "exclusive lock report held" {
		t.Errorf("after a resent Postpone: postponed %d, last_error %q; want 1 and the first reason", got.Postponed, got.LastError)
	}

	// Postponed again with no reason: the count grows, last_error stays.
	if err := c.Retry(ctx, "default", id); err != nil {
		t.Fatal(err)
	}
	j = claimOne(t, c, "default", time.Minute, "w")
	if j.Postponed != 1 || j.Attempt != 1 {
		t.Errorf("claimed postponed job: postponed %d, attempt %d; want 1, 1", j.Postponed, j.Attempt)
	}
	if err := c.broker().Postpone(ctx, j, time.Second, ""); err != nil {
		t.Fatal(err)
	}
	got, _ = c.Get(ctx, "default", id)
	if got.Postponed != 2 || got.LastError != "exclusive lock report held" {
		t.Errorf("postponed twice: postponed %d, last_error %q; want 2, the earlier reason", got.Postponed, got.LastError)
	}
	b, _ := json.Marshal(got)
	if !strings.Contains(string(b), `"postponed":2`) {
		t.Errorf("job JSON = %s, want postponed 2", b)
	}
	if err := c.broker().Postpone(ctx, j, time.Second, "x"); err != nil {
		t.Errorf("resent Postpone() err = %v, want nil", err)
	}
	if err := c.broker().Ack(ctx, j, nil); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Ack() after Postpone err = %v, want ErrLeaseLost", err)
	}
}

func TestPostponeRefusals(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a")
	j := claimOne(t, c, "default", time.Minute, "w")
	for _, after := range []time.Duration{0, -time.Second} {
		if err := c.broker().Postpone(ctx, j, after, "x"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Postpone(after %s) err = %v, want ErrInvalid", after, err)
		}
	}
	stale := *j
	stale.Lease += "x"
	if err := c.broker().Postpone(ctx, &stale, time.Second, "x"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Postpone(stale lease) err = %v, want ErrLeaseLost", err)
	}
	if got, _ := c.Get(ctx, "default", j.ID); got.State != StateActive || got.Postponed != 0 || got.LastError != "" {
		t.Errorf("job after refused postpones = %+v, want active and untouched", got)
	}

	// A cancelled job is not postponed: it ends dead, as on every path.
	if _, err := c.Cancel(ctx, "default", j.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.broker().Postpone(ctx, j, time.Second, "lock held"); !errors.Is(err, ErrCancelled) {
		t.Fatalf("Postpone(cancelled) err = %v, want ErrCancelled", err)
	}
	got, _ := c.Get(ctx, "default", j.ID)
	if got.State != StateDead || got.Postponed != 0 || got.LastError != "cancelled by operator" {
		t.Errorf("postponed cancelled job = %s, postponed %d, %q; want dead, 0, cancelled by operator", got.State, got.Postponed, got.LastError)
	}
	if err := c.broker().Postpone(ctx, j, time.Second, "lock held"); !errors.Is(err, ErrCancelled) {
		t.Errorf("resent Postpone(cancelled) err = %v, want ErrCancelled", err)
	}
}
