package queue

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDeleteEachState(t *testing.T) {
	c := setup(t, Config{})
	ctx := context.Background()
	qk := c.keys.queue("default")
	ready, _ := c.Enqueue(ctx, "t", nil, Unique(time.Hour))
	sched, _ := c.Enqueue(ctx, "t", []byte("s"), Delay(time.Hour))
	for _, id := range []string{ready, sched} {
		if err := c.Delete(ctx, "default", id); err != nil {
			t.Fatalf("Delete(%s) err = %v", id, err)
		}
		if n := c.rdb.Exists(ctx, qk.job(id)).Val(); n != 0 {
			t.Errorf("job hash %s still exists after Delete", id)
		}
	}
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 0 {
		t.Errorf("ready list holds %d IDs after Delete, want 0", n)
	}
	if n := c.rdb.ZCard(ctx, qk.scheduled).Val(); n != 0 {
		t.Errorf("scheduled set holds %d after Delete, want 0", n)
	}
	// The unique key is released: the same job enqueues again.
	if _, err := c.Enqueue(ctx, "t", nil, Unique(time.Hour)); err != nil {
		t.Errorf("Enqueue after deleting the unique job err = %v, want nil", err)
	}
	var deleted int
	for e, err := range c.Events(ctx, []string{"default"}, "0") {
		if err != nil {
			t.Fatal(err)
		}
		if e.Name == EventDeleted {
			deleted++
		}
		if e.ID == sched && e.Name == EventDeleted {
			break
		}
	}
	if deleted != 2 {
		t.Errorf("%d deleted events, want 2", deleted)
	}
}

func TestDeleteRefusesActiveAndMissing(t *testing.T) {
	c := setup(t, Config{})
	ctx := context.Background()
	id, _ := c.Enqueue(ctx, "t", nil)
	if _, err := c.broker().Claim(ctx, "default", 1, time.Minute, "w"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "default", id); !errors.Is(err, ErrState) {
		t.Errorf("Delete(active) err = %v, want ErrState", err)
	}
	if err := c.Delete(ctx, "default", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete(missing) err = %v, want ErrNotFound", err)
	}
	if err := c.Delete(ctx, "bad queue", id); !errors.Is(err, ErrInvalid) {
		t.Errorf("Delete(bad queue) err = %v, want ErrInvalid", err)
	}
}

func TestAuditLog(t *testing.T) {
	c := setup(t, Config{})
	ctx := context.Background()
	for i, a := range []string{"pause", "retry", "purge"} {
		if err := c.Audit(ctx, AuditEntry{Who: "ops", Action: a, Queue: "default", Target: "x", Count: i}); err != nil {
			t.Fatal(err)
		}
	}
	es, err := c.AuditLog(ctx, "", 2)
	if err != nil || len(es) != 2 || es[0].Action != "purge" || es[0].Count != 2 || es[0].Who != "ops" || es[0].At.IsZero() {
		t.Fatalf("AuditLog(newest 2) = %+v, %v; want purge then retry", es, err)
	}
	older, err := c.AuditLog(ctx, es[1].ID, 10)
	if err != nil || len(older) != 1 || older[0].Action != "pause" {
		t.Errorf("AuditLog(before %s) = %+v, %v; want pause", es[1].ID, older, err)
	}
	if _, err := c.AuditLog(ctx, "nope", 10); !errors.Is(err, ErrInvalid) {
		t.Errorf("AuditLog(bad cursor) err = %v, want ErrInvalid", err)
	}
	if n := c.rdb.XLen(ctx, c.keys.audit()).Val(); n != 3 {
		t.Errorf("%s holds %d entries, want 3", c.keys.audit(), n)
	}
}

func TestDetailAndServerInfo(t *testing.T) {
	c := setup(t, Config{})
	ctx := context.Background()
	id, _ := c.Enqueue(ctx, "t", nil, Unique(time.Hour), Exclusive("k"))
	j, err := c.Get(ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Detail(ctx, j)
	if err != nil || d.UniqueHolder != id || d.UniqueTTL <= 0 || d.TTL != 0 || d.LockHeld {
		t.Errorf("Detail() = %+v, %v; want unique key held by the job, no TTL, lock free", d, err)
	}
	info, err := c.ServerInfo(ctx)
	if err != nil || info.Version == "" || info.Policy == "" || info.UsedBytes <= 0 {
		t.Errorf("ServerInfo() = %+v, %v", info, err)
	}
	st, err := c.StatsOf(ctx, "default")
	if err != nil || len(st) != 1 || st[0].Ready != 1 {
		t.Errorf("StatsOf(default) = %+v, %v; want 1 ready", st, err)
	}
}
