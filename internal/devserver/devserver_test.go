package devserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// devClient is a queue.Client on a fresh in-memory server, both closed when the test ends.
func devClient(t *testing.T) *queue.Client {
	t.Helper()
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { rdb.Close() })
	c, err := queue.NewClient(rdb, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLifecycleScriptsRun walks a job through every transition on the in-memory server:
// the Lua scripts must keep to what it supports.
func TestLifecycleScriptsRun(t *testing.T) {
	c := devClient(t)
	ctx := context.Background()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	claim := func(lease time.Duration) *queue.Job {
		t.Helper()
		jobs, err := broker.Of(c).Claim(ctx, "default", 5, lease, "w")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("Claim() = %d jobs, %v; want 1", len(jobs), err)
		}
		return jobs[0]
	}

	id, err := c.Enqueue(ctx, "a", []byte("x"))
	step("enqueue", err)
	_, err = c.Enqueue(ctx, "a", nil, queue.ID(id))
	if !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("duplicate Enqueue() err = %v", err)
	}
	_, err = c.EnqueueBatch(ctx, []queue.BatchJob{{Type: "later", Options: []queue.Option{queue.Delay(50 * time.Millisecond)}}})
	step("enqueue batch", err)

	j := claim(time.Second)
	lost, _, err := broker.Of(c).Heartbeat(ctx, "default", time.Second, []*queue.Job{j})
	if err != nil || len(lost) != 0 {
		t.Fatalf("Heartbeat() = %v, %v", lost, err)
	}
	step("ack", broker.Of(c).Ack(ctx, j, []byte("r")))
	if q, token, err := broker.Of(c).Wait(ctx, []string{"default"}, 100*time.Millisecond); err != nil || q != "default" || token != proto.WakeScheduled {
		t.Fatalf("Wait() = %q, %q, %v; want the delayed job's token from default", q, token, err)
	}

	time.Sleep(60 * time.Millisecond)
	moved, next, err := broker.Of(c).Promote(ctx, "default")
	if err != nil || moved != 1 || next >= 0 {
		t.Fatalf("Promote() = %d, %s, %v; want 1 moved, nothing left", moved, next, err)
	}
	j = claim(time.Second)
	state, err := broker.Of(c).Fail(ctx, j, "boom", 0)
	if err != nil || state != queue.StateRetry {
		t.Fatalf("Fail() = %s, %v", state, err)
	}
	broker.Of(c).Promote(ctx, "default")
	j = claim(time.Second)
	step("hand back", broker.Of(c).HandBack(ctx, j, 0))
	j = claim(10 * time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if n, err := broker.Of(c).Reap(ctx, "default"); err != nil || n != 1 {
		t.Fatalf("Reap() = %d, %v; want 1", n, err)
	}
	if err := broker.Of(c).Ack(ctx, j, nil); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("stale Ack() err = %v, want ErrLeaseLost", err)
	}
	broker.Of(c).Promote(ctx, "default")
	j = claim(time.Second)
	state, err = broker.Of(c).Fail(ctx, j, "fatal", proto.NoRetry)
	if err != nil || state != queue.StateDead {
		t.Fatalf("Fail(NoRetry) = %s, %v", state, err)
	}
	got, err := c.Get(ctx, "default", j.ID)
	if err != nil || got.State != queue.StateDead || got.Attempt != 3 {
		t.Fatalf("dead job = %+v, %v; want dead after attempt 3", got, err)
	}
}

// TestCancelNoticeFromScript: cancel.lua PUBLISHes from Lua when it flags an active job;
// the in-memory server must run that and deliver it to WatchCancels.
func TestCancelNoticeFromScript(t *testing.T) {
	c := devClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notices := make(chan proto.CancelNotice, 1)
	done := make(chan error, 1)
	go func() { done <- broker.Of(c).WatchCancels(ctx, func(n proto.CancelNotice) { notices <- n }) }()
	deadline := time.Now().Add(5 * time.Second)
	rdb := broker.Of(c).Redis()
	for rdb.PubSubNumSub(ctx, "jobs:cancel").Val()["jobs:cancel"] != 1 {
		if time.Now().After(deadline) {
			t.Fatal("WatchCancels not subscribed within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Enqueue(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := broker.Of(c).Claim(ctx, "default", 1, time.Minute, "w")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim() = %d jobs, %v; want 1", len(jobs), err)
	}
	if state, err := c.Cancel(ctx, "default", jobs[0].ID); err != nil || state != queue.StateActive {
		t.Fatalf("Cancel(active) = %s, %v; want active", state, err)
	}
	select {
	case n := <-notices:
		if want := (proto.CancelNotice{Queue: "default", ID: jobs[0].ID}); n != want {
			t.Errorf("notice = %+v, want %+v", n, want)
		}
	case <-time.After(time.Second):
		t.Fatal("no cancel notice within 1s")
	}
	if err := broker.Of(c).Ack(ctx, jobs[0], nil); !errors.Is(err, queue.ErrCancelled) {
		t.Errorf("Ack(cancelled) err = %v, want ErrCancelled", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchCancels() = %v, want nil", err)
	}
}

// TestWorkflowScriptsRun runs a dependency across queues (link, the outbox, resolve) and a
// batch with its callback on the in-memory server.
func TestWorkflowScriptsRun(t *testing.T) {
	c := devClient(t)
	ctx := context.Background()
	b := broker.Of(c)
	dep, err := c.Enqueue(ctx, "a", nil, queue.On("o"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Enqueue(ctx, "b", nil, queue.AfterJob("o", dep))
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := c.NewBatch(ctx, queue.BatchOptions{OnSuccess: &queue.Callback{Type: "cb"}},
		[]queue.BatchJob{{Type: "child", Options: []queue.Option{queue.On("o")}}})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := b.Claim(ctx, "o", 5, time.Minute, "w")
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Claim(o) = %v, %v", jobs, err)
	}
	for _, j := range jobs {
		if err := b.Ack(ctx, j, []byte("r")); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.Deliver(ctx, "o"); err != nil || n != 2 {
		t.Fatalf("Deliver(o) = %d, %v; want 2", n, err)
	}
	if j, err := c.Get(ctx, "default", d); err != nil || j.State != queue.StateReady {
		t.Errorf("dependent = %+v, %v; want ready", j, err)
	}
	if j, err := c.Get(ctx, "default", ref.ID+".success"); err != nil || j.State != queue.StateReady ||
		!strings.Contains(string(j.Payload), `"done":1`) {
		t.Errorf("callback = %+v, %v; want ready with the counts", j, err)
	}
}
