package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
)

// cancelActive enqueues a job on queue q (unique, so the test can see its key released),
// claims it and cancels it while it is active.
func cancelActive(t *testing.T, c *Client, q string) *Job {
	t.Helper()
	mustEnqueue(t, c, "a", On(q), Unique(time.Hour))
	j := claimOne(t, c, q, time.Minute, "w")
	if state, err := c.Cancel(ctx, q, j.ID); err != nil || state != StateActive {
		t.Fatalf("Cancel(active) = %s, %v; want active (cancelling)", state, err)
	}
	return j
}

// wantCancelledDead checks that j ended dead as cancelled by its own lease, out of every
// other state's list or set, with its unique key released.
func wantCancelledDead(t *testing.T, c *Client, j *Job, attempt int) {
	t.Helper()
	got, err := c.Get(ctx, j.Queue, j.ID)
	if err != nil || got.State != StateDead || got.LastError != "cancelled by operator" || got.Attempt != attempt {
		t.Fatalf("cancelled job = %+v, %v; want dead, last_error %q, attempt %d", got, err, "cancelled by operator", attempt)
	}
	qk := c.keys.queue(j.Queue)
	if c.rdb.ZScore(ctx, qk.dead, j.ID).Err() != nil {
		t.Errorf("cancelled job not in the dead set")
	}
	for _, set := range []string{qk.active, qk.done, qk.scheduled} {
		if c.rdb.ZScore(ctx, set, j.ID).Err() == nil {
			t.Errorf("cancelled job still in %s", set)
		}
	}
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 0 {
		t.Errorf("ready has %d jobs, want 0", n)
	}
	if lease := c.rdb.HGet(ctx, qk.job(j.ID), "lease").Val(); lease != "cancelled!"+j.Lease {
		t.Errorf("lease field = %q, want the ended lease %q", lease, "cancelled!"+j.Lease)
	}
	if ttl := c.rdb.PTTL(ctx, qk.job(j.ID)).Val(); ttl < 29*24*time.Hour {
		t.Errorf("dead job TTL = %s, want ~30 days", ttl)
	}
	if _, err := c.Enqueue(ctx, "a", []byte(`{"n":1}`), On(j.Queue), Unique(time.Hour)); err != nil {
		t.Errorf("unique key not released by the cancelled job: Enqueue() err = %v", err)
	}
}

func failedToday(t *testing.T, c *Client, q string) (processed, failed int64) {
	t.Helper()
	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Name == q {
			return s.ProcessedToday, s.FailedToday
		}
	}
	return 0, 0
}

func TestAckOfCancelledJobEndsDead(t *testing.T) {
	c := setup(t, Config{})
	j := cancelActive(t, c, "default")
	if err := c.broker().Ack(ctx, j, []byte("ok")); !errors.Is(err, ErrCancelled) {
		t.Fatalf("Ack(cancelled) err = %v, want ErrCancelled", err)
	}
	wantCancelledDead(t, c, j, 1)
	if got, _ := c.Get(ctx, "default", j.ID); len(got.Result) != 0 {
		t.Errorf("cancelled job stored result %q, want none", got.Result)
	}
	if p, f := failedToday(t, c, "default"); p != 1 || f != 1 {
		t.Errorf("processed, failed today = %d, %d; want 1, 1", p, f)
	}
	// A resent ack gets the same answer and changes nothing.
	if err := c.broker().Ack(ctx, j, []byte("ok")); !errors.Is(err, ErrCancelled) {
		t.Errorf("resent Ack(cancelled) err = %v, want ErrCancelled", err)
	}
	if p, f := failedToday(t, c, "default"); p != 1 || f != 1 {
		t.Errorf("after a resent ack: processed, failed today = %d, %d; want 1, 1", p, f)
	}
	if state, err := c.broker().Fail(ctx, j, "x", 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Fail() after the cancelled ack = %s, %v; want ErrLeaseLost", state, err)
	}
}

func TestAckClaimOfCancelledJobEndsDead(t *testing.T) {
	c := setup(t, Config{})
	j := cancelActive(t, c, "default")
	mustEnqueue(t, c, "b")
	other := claimOne(t, c, "default", time.Minute, "w")
	fin := []Finished{{Job: j, Result: []byte("ok")}, {Job: other, Result: []byte("ok")}}
	acked, _, err := c.broker().ackFinished(ctx, "default", fin, 0, time.Minute, "w")
	if err != nil || len(acked) != 2 || !errors.Is(acked[0], ErrCancelled) || acked[1] != nil {
		t.Fatalf("AckClaim() = %v, %v; want [ErrCancelled, nil]", acked, err)
	}
	if got, _ := c.Get(ctx, "default", j.ID); got.State != StateDead || got.LastError != "cancelled by operator" {
		t.Errorf("cancelled job = %s %q, want dead, cancelled by operator", got.State, got.LastError)
	}
	if got, _ := c.Get(ctx, "default", other.ID); got.State != StateDone {
		t.Errorf("job acked beside it = %s, want done", got.State)
	}
	acked, _, err = c.broker().ackFinished(ctx, "default", fin, 0, time.Minute, "w")
	if err != nil || len(acked) != 2 || !errors.Is(acked[0], ErrCancelled) || acked[1] != nil {
		t.Errorf("resent AckClaim() = %v, %v; want [ErrCancelled, nil] again", acked, err)
	}
	if p, f := failedToday(t, c, "default"); p != 2 || f != 1 {
		t.Errorf("processed, failed today = %d, %d; want 2, 1", p, f)
	}
}

func TestHandBackOfCancelledJobEndsDead(t *testing.T) {
	for _, after := range []time.Duration{0, time.Hour} {
		t.Run(after.String(), func(t *testing.T) {
			c := setup(t, Config{})
			j := cancelActive(t, c, "default")
			c.rdb.Del(ctx, c.keys.queue("default").wake)
			if err := c.broker().HandBack(ctx, j, after); !errors.Is(err, ErrCancelled) {
				t.Fatalf("HandBack(cancelled, %s) err = %v, want ErrCancelled", after, err)
			}
			wantCancelledDead(t, c, j, 0) // handed back: the attempt does not count
			if err := c.broker().HandBack(ctx, j, after); !errors.Is(err, ErrCancelled) {
				t.Errorf("resent HandBack(cancelled) err = %v, want ErrCancelled", err)
			}
			if p, f := failedToday(t, c, "default"); p != 0 || f != 0 {
				t.Errorf("processed, failed today = %d, %d; want 0, 0 (the job did not run to the end)", p, f)
			}
			if err := c.broker().Ack(ctx, j, nil); !errors.Is(err, ErrCancelled) {
				t.Errorf("Ack() after the cancelled hand back err = %v, want ErrCancelled (same lease, same end)", err)
			}
		})
	}
}

func TestFailAndReapOfCancelledJobEndDead(t *testing.T) {
	c := setup(t, Config{})
	j := cancelActive(t, c, "default")
	if state, err := c.broker().Fail(ctx, j, "context canceled", time.Second); err != nil || state != StateDead {
		t.Fatalf("Fail(cancelled) = %s, %v; want dead", state, err)
	}
	// Reap: a cancelled job whose worker died goes to dead however many attempts it has.
	mustEnqueue(t, c, "b", On("reaped"))
	r := claimOne(t, c, "reaped", 20*time.Millisecond, "w")
	if state, err := c.Cancel(ctx, "reaped", r.ID); err != nil || state != StateActive {
		t.Fatalf("Cancel(active) = %s, %v", state, err)
	}
	eventually(t, 2*time.Second, "cancelled job reaped", func() bool {
		n, _ := c.broker().Reap(ctx, "reaped")
		return n == 1
	})
	got, err := c.Get(ctx, "reaped", r.ID)
	if err != nil || got.State != StateDead || !strings.HasPrefix(got.LastError, "lease expired") {
		t.Errorf("reaped cancelled job = %+v, %v; want dead", got, err)
	}
}

// subscribers counts the subscriptions to the cancel channel: on a cluster, summed over
// the nodes (each counts only its own clients).
func subscribers(t *testing.T, c *Client) int64 {
	t.Helper()
	ch := c.keys.cancelChannel()
	cc, ok := c.rdb.(*redis.ClusterClient)
	if !ok {
		return c.rdb.PubSubNumSub(ctx, ch).Val()[ch]
	}
	var total atomic.Int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.PubSubNumSub(ctx, ch).Result()
		total.Add(n[ch])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total.Load()
}

// watch starts WatchCancels and waits until it is subscribed. The returned function
// stops it and checks that it returned nil.
func watch(t *testing.T, c *Client) (<-chan proto.CancelNotice, func()) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	notices := make(chan proto.CancelNotice, 16)
	done := make(chan error, 1)
	go func() { done <- c.broker().WatchCancels(wctx, func(n proto.CancelNotice) { notices <- n }) }()
	eventually(t, 5*time.Second, "WatchCancels subscribed", func() bool { return subscribers(t, c) == 1 })
	return notices, func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("WatchCancels() after ctx ended = %v, want nil", err)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("WatchCancels() did not return within 2s of its ctx ending")
		}
	}
}

// queueAwayFromCancelChannel returns a queue name whose keys, on a cluster, live on
// another node than the one WatchCancels subscribes on (the master of the channel name's
// slot), so the notice must cross the cluster bus.
func queueAwayFromCancelChannel(t *testing.T, c *Client) string {
	t.Helper()
	cc, ok := c.rdb.(*redis.ClusterClient)
	if !ok {
		return "mail.out"
	}
	sub, err := cc.MasterForKey(ctx, c.keys.cancelChannel())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		q := fmt.Sprintf("mail.out%d", i)
		node, err := cc.MasterForKey(ctx, c.keys.queue(q).wake)
		if err != nil {
			t.Fatal(err)
		}
		if node.Options().Addr != sub.Options().Addr {
			return q
		}
	}
	t.Fatal("no queue name on another node than the cancel channel's")
	return ""
}

func TestWatchCancelsHearsCancelOfActiveJob(t *testing.T) {
	c := setup(t, Config{})
	notices, stop := watch(t, c)
	defer stop()
	q := queueAwayFromCancelChannel(t, c)
	mustEnqueue(t, c, "a", On(q))
	mustEnqueue(t, c, "a", On(q))
	jobs, err := c.broker().Claim(ctx, q, 2, time.Minute, "w")
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Claim(2) = %d jobs, %v", len(jobs), err)
	}
	waiting := mustEnqueue(t, c, "a", On(q))
	if state, err := c.Cancel(ctx, q, waiting); err != nil || state != StateDead {
		t.Fatalf("Cancel(waiting) = %s, %v; want dead", state, err)
	}
	sent := time.Now()
	for _, j := range jobs {
		if state, err := c.Cancel(ctx, q, j.ID); err != nil || state != StateActive {
			t.Fatalf("Cancel(active) = %s, %v; want active", state, err)
		}
	}
	// A waiting job's cancel sends no notice: the first one heard is the first active job's.
	for _, j := range jobs {
		select {
		case n := <-notices:
			if want := (proto.CancelNotice{Queue: q, ID: j.ID}); n != want {
				t.Errorf("notice = %+v, want %+v (one per active job, in order)", n, want)
			}
		case <-time.After(time.Second - time.Since(sent)):
			t.Fatalf("no notice of the cancel of %s within 1s", j.ID)
		}
	}
	select {
	case n := <-notices:
		t.Errorf("extra notice %+v", n)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestParseCancelNotice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want proto.CancelNotice
		ok   bool
	}{
		{"default 01J9Z3K4M5N6P7Q8R9S0T1V2W3", proto.CancelNotice{Queue: "default", ID: "01J9Z3K4M5N6P7Q8R9S0T1V2W3"}, true},
		{"a.b-c_d order:42", proto.CancelNotice{Queue: "a.b-c_d", ID: "order:42"}, true},
		{"default", proto.CancelNotice{Queue: "default"}, true}, // limit.lua: the limits changed
		{" id", proto.CancelNotice{}, false},
		{"q ", proto.CancelNotice{}, false},
	} {
		got, ok := parseCancelNotice(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseCancelNotice(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// A scheduled job cancelled is dead with no run time left: `jobs inspect` showed its
// run_at, still to come, beside its dead state (Q3).
func TestCancelledScheduledJobHasNoRunTime(t *testing.T) {
	c := setup(t, Config{})
	id, err := c.Enqueue(ctx, "a", nil, Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if state, err := c.Cancel(ctx, "default", id); err != nil || state != StateDead {
		t.Fatalf("Cancel(scheduled) = %s, %v; want dead", state, err)
	}
	j, err := c.Get(ctx, "default", id)
	if err != nil || j.State != StateDead || !j.RunAt.IsZero() {
		t.Errorf("cancelled scheduled job = state %s, run at %v (%v); want dead, no run time", j.State, j.RunAt, err)
	}
}
