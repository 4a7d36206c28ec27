package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

var ctx = context.Background()

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustEnqueue(t *testing.T, c *Client, typ string, opts ...Option) string {
	t.Helper()
	id, err := c.Enqueue(ctx, typ, []byte(`{"n":1}`), opts...)
	if err != nil {
		t.Fatalf("Enqueue() err = %v", err)
	}
	return id
}

func claimOne(t *testing.T, c *Client, q string, lease time.Duration, worker string) *Job {
	t.Helper()
	jobs, err := c.broker().Claim(ctx, q, 1, lease, worker)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim() = %d jobs, err %v; want 1 job", len(jobs), err)
	}
	return jobs[0]
}

func TestEnqueueWritesHashReadyListAndWakeToken(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "email", MaxRetry(3), Timeout(time.Minute))
	qk := c.keys.queue("default")
	h := c.rdb.HGetAll(ctx, qk.job(id)).Val()
	want := map[string]string{"type": "email", "payload": `{"n":1}`, "state": "ready",
		"max_retry": "3", "timeout_ms": "60000"}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("job hash %s = %q, want %q", k, h[k], v)
		}
	}
	if c.rdb.HExists(ctx, qk.job(id), "attempt").Val() {
		t.Errorf("a waiting job stores attempt; absent means 0")
	}
	if got := c.rdb.LRange(ctx, qk.ready, 0, -1).Val(); len(got) != 1 || got[0] != id {
		t.Errorf("ready = %v, want [%s]", got, id)
	}
	if n := c.rdb.LLen(ctx, qk.wake).Val(); n != 1 {
		t.Errorf("wake tokens = %d, want 1", n)
	}
	if !c.rdb.SIsMember(ctx, c.keys.queues(), "default").Val() {
		t.Errorf("queues set lacks default")
	}
	if len(id) != 26 {
		t.Errorf("generated ID %q has %d characters, want 26", id, len(id))
	}
}

func TestEnqueueBadInput(t *testing.T) {
	c := setup(t, Config{MaxPayload: 10})
	cases := []struct {
		name    string
		typ     string
		payload string
		opts    []Option
		want    error
		message string
	}{
		{"empty type", "", "", nil, ErrInvalid, "job type"},
		{"type with space", "a b", "", nil, ErrInvalid, "job type"},
		{"bad queue", "t", "", []Option{On("a{b}")}, ErrInvalid, "queue name"},
		{"empty queue", "t", "", []Option{On("")}, ErrInvalid, "queue name"},
		{"negative delay", "t", "", []Option{Delay(-time.Second)}, ErrInvalid, "negative"},
		{"delay and at", "t", "", []Option{Delay(time.Second), At(time.Now())}, ErrInvalid, "both"},
		{"negative retry", "t", "", []Option{MaxRetry(-1)}, ErrInvalid, "max retry"},
		{"zero timeout", "t", "", []Option{Timeout(0)}, ErrInvalid, "timeout"},
		{"long id", "t", "", []Option{ID(strings.Repeat("x", 129))}, ErrInvalid, "128"},
		{"too large", "t", "12345678901", nil, ErrPayloadTooLarge, "11 bytes, the limit is 10"},
	}
	for _, tc := range cases {
		_, err := c.Enqueue(ctx, tc.typ, []byte(tc.payload), tc.opts...)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("%s: Enqueue() err = %v, want %v mentioning %q", tc.name, err, tc.want, tc.message)
		}
	}
	if n := c.rdb.Exists(ctx, c.keys.queues(), c.keys.queue("default").ready).Val(); n != 0 {
		t.Errorf("bad enqueues wrote %d keys, want 0", n)
	}
}

func TestEnqueueDuplicateID(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a", ID("order-1"))
	id, err := c.Enqueue(ctx, "b", nil, ID("order-1"))
	if !errors.Is(err, ErrDuplicate) || id != "order-1" {
		t.Fatalf("Enqueue(dup) = %q, %v; want order-1, ErrDuplicate", id, err)
	}
	j, err := c.Get(ctx, "default", "order-1")
	if err != nil || j.Type != "a" {
		t.Fatalf("Get() = %+v, %v; want the first job untouched", j, err)
	}
	if n := c.rdb.LLen(ctx, c.keys.queue("default").ready).Val(); n != 1 {
		t.Errorf("ready has %d entries, want 1", n)
	}
}

func TestDelayedJobIsPromotedWhenDue(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "later", Delay(300*time.Millisecond))
	qk := c.keys.queue("default")
	if got := c.rdb.HGet(ctx, qk.job(id), "state").Val(); got != "scheduled" {
		t.Fatalf("state = %q, want scheduled", got)
	}
	moved, next, err := c.broker().Promote(ctx, "default")
	if err != nil || moved != 0 || next <= 0 || next > 300*time.Millisecond {
		t.Fatalf("Promote() = %d, %s, %v; want 0 moved, next in (0, 300ms]", moved, next, err)
	}
	if jobs, _ := c.broker().Claim(ctx, "default", 1, time.Second, "w"); len(jobs) != 0 {
		t.Fatalf("claimed a job before it was due")
	}
	time.Sleep(next)
	eventually(t, time.Second, "job promoted", func() bool {
		moved, _, _ = c.broker().Promote(ctx, "default")
		return moved == 1
	})
	if _, next, _ := c.broker().Promote(ctx, "default"); next >= 0 {
		t.Errorf("Promote() next = %s with nothing waiting, want negative", next)
	}
	j := claimOne(t, c, "default", time.Second, "w")
	if j.ID != id || j.RunAt.IsZero() {
		t.Errorf("claimed %s run_at %v, want %s with run_at", j.ID, j.RunAt, id)
	}
}

func TestAtInThePastIsReadyNow(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "x", At(time.Now().Add(-time.Hour)))
	if j := claimOne(t, c, "default", time.Second, "w"); j.ID != id {
		t.Fatalf("claimed %s, want %s", j.ID, id)
	}
}

func TestClaimAckDone(t *testing.T) {
	c := setup(t, Config{})
	first := mustEnqueue(t, c, "a")
	second := mustEnqueue(t, c, "a")
	jobs, err := c.broker().Claim(ctx, "default", 5, 10*time.Second, "w1")
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Claim(5) = %d jobs, %v; want 2", len(jobs), err)
	}
	if jobs[0].ID != first || jobs[1].ID != second {
		t.Errorf("claim order %s, %s; want FIFO %s, %s", jobs[0].ID, jobs[1].ID, first, second)
	}
	j := jobs[0]
	if j.State != StateActive || j.Attempt != 1 || j.Worker != "w1" || j.Lease == "" ||
		string(j.Payload) != `{"n":1}` || j.Type != "a" || j.Queue != "default" {
		t.Errorf("claimed job = %+v", j)
	}
	if jobs[0].Lease == jobs[1].Lease {
		t.Errorf("two claims share lease token %q", j.Lease)
	}
	qk := c.keys.queue("default")
	score := c.rdb.ZScore(ctx, qk.active, j.ID).Val()
	if d := time.Until(time.UnixMilli(int64(score))); d < 9*time.Second || d > 11*time.Second {
		t.Errorf("lease deadline in %s, want ~10s", d)
	}
	if err := c.broker().Ack(ctx, j, []byte("ok")); err != nil {
		t.Fatalf("Ack() err = %v", err)
	}
	got, err := c.Get(ctx, "default", j.ID)
	if err != nil || got.State != StateDone || string(got.Result) != "ok" || got.FinishedAt.IsZero() {
		t.Fatalf("after ack: %+v, %v", got, err)
	}
	if ttl := c.rdb.PTTL(ctx, qk.job(j.ID)).Val(); ttl < 23*time.Hour {
		t.Errorf("done job TTL = %s, want ~24h", ttl)
	}
	if c.rdb.ZScore(ctx, qk.active, j.ID).Err() == nil {
		t.Errorf("done job still in active")
	}
	// The same lease acking again is an ack resent after a lost reply: reported done,
	// changing nothing. A stale lease is refused (TestLateAckIsRefused and below).
	if err := c.broker().Ack(ctx, j, []byte("resent")); err != nil {
		t.Errorf("second Ack() with the same lease err = %v, want nil (already done)", err)
	}
	acked, _, err := c.broker().ackFinished(ctx, "default", []Finished{{Job: j, Result: []byte("resent")}}, 0, time.Minute, "w1")
	if err != nil || len(acked) != 1 || acked[0] != nil {
		t.Errorf("AckClaim() of the acked job = %v, %v; want [nil]", acked, err)
	}
	again, err := c.Get(ctx, "default", j.ID)
	if err != nil || again.State != StateDone || string(again.Result) != "ok" || !again.FinishedAt.Equal(got.FinishedAt) {
		t.Errorf("after the resent acks: %+v, %v; want unchanged (result ok)", again, err)
	}
	if st, err := c.Stats(ctx); err != nil || len(st) != 1 || st[0].ProcessedToday != 1 {
		t.Errorf("Stats() = %+v, %v; want 1 processed today, not one per ack", st, err)
	}
	other := *j
	other.Lease += "x"
	if err := c.broker().Ack(ctx, &other, nil); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Ack() of a done job with another lease err = %v, want ErrLeaseLost", err)
	}
	// The ended lease left in the hash ("done!<token>") is never a token itself: presented
	// as one, it is refused by every transition, and the done job stays out of active.
	forged := *j
	forged.Lease = "done!" + j.Lease
	if lost, _, err := c.broker().Heartbeat(ctx, "default", time.Minute, []*Job{&forged}); err != nil || len(lost) != 1 {
		t.Errorf("Heartbeat(ended lease as a token) lost = %v, %v; want it lost", lost, err)
	}
	if _, err := c.broker().Fail(ctx, &forged, "x", 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Fail(ended lease as a token) err = %v, want ErrLeaseLost", err)
	}
	if err := c.broker().HandBack(ctx, &forged, 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("HandBack(ended lease as a token) err = %v, want ErrLeaseLost", err)
	}
	if err := c.broker().Ack(ctx, &forged, nil); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Ack(ended lease as a token) err = %v, want ErrLeaseLost", err)
	}
	if c.rdb.ZScore(ctx, qk.active, j.ID).Err() == nil {
		t.Errorf("the done job is back in active")
	}
}

func TestDoneRetentionNegativeDeletes(t *testing.T) {
	c := setup(t, Config{DoneRetention: -1})
	mustEnqueue(t, c, "a")
	j := claimOne(t, c, "default", time.Second, "w")
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "default", j.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get() err = %v, want ErrNotFound", err)
	}
}

func TestPausedQueueClaimsNothing(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a")
	qk := c.keys.queue("default")
	c.rdb.Set(ctx, qk.paused, "1", 0)
	if jobs, err := c.broker().Claim(ctx, "default", 1, time.Second, "w"); err != nil || len(jobs) != 0 {
		t.Fatalf("Claim(paused) = %d jobs, %v; want none", len(jobs), err)
	}
	c.rdb.Del(ctx, qk.paused)
	claimOne(t, c, "default", time.Second, "w")
}

func TestFailRetriesThenDies(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "flaky", MaxRetry(1))
	qk := c.keys.queue("default")

	j := claimOne(t, c, "default", time.Second, "w")
	state, err := c.broker().Fail(ctx, j, "boom 1", 0)
	if err != nil || state != StateRetry {
		t.Fatalf("Fail() = %s, %v; want retry", state, err)
	}
	if c.rdb.ZScore(ctx, qk.retry, id).Err() != nil {
		t.Fatalf("job not in retry set")
	}
	// The same lease failing again is a call resent after a lost reply: it gets the same
	// outcome and changes nothing (no second failure counted, last_error kept).
	if state, err := c.broker().Fail(ctx, j, "resent", 0); err != nil || state != StateRetry {
		t.Errorf("resent Fail() = %s, %v; want retry, as the first", state, err)
	}
	if got, _ := c.Get(ctx, "default", id); got.LastError != "boom 1" || got.State != StateRetry {
		t.Errorf("after the resent Fail: state %s, last_error %q; want retry, boom 1", got.State, got.LastError)
	}
	if st, _ := c.Stats(ctx); len(st) != 1 || st[0].FailedToday != 1 {
		t.Errorf("Stats() = %+v; want 1 failed today", st)
	}
	// Only the same call is recognised: that lease was ended by a fail, not an ack or a
	// hand back.
	if err := c.broker().Ack(ctx, j, nil); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Ack() with the lease a fail ended err = %v, want ErrLeaseLost", err)
	}
	if err := c.broker().HandBack(ctx, j, 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("HandBack() with the lease a fail ended err = %v, want ErrLeaseLost", err)
	}
	if moved, _, _ := c.broker().Promote(ctx, "default"); moved != 1 {
		t.Fatalf("Promote() moved %d, want 1", moved)
	}
	j = claimOne(t, c, "default", time.Second, "w")
	if j.Attempt != 2 || j.LastError != "boom 1" {
		t.Errorf("second claim attempt %d last_error %q, want 2, boom 1", j.Attempt, j.LastError)
	}
	state, err = c.broker().Fail(ctx, j, "boom 2", time.Hour)
	if err != nil || state != StateDead {
		t.Fatalf("Fail(last attempt) = %s, %v; want dead", state, err)
	}
	if state, err := c.broker().Fail(ctx, j, "resent", time.Hour); err != nil || state != StateDead {
		t.Errorf("resent Fail(last attempt) = %s, %v; want dead, as the first", state, err)
	}
	stale := *j
	stale.Lease += "x"
	if _, err := c.broker().Fail(ctx, &stale, "stale", 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Fail() of the dead job with another lease err = %v, want ErrLeaseLost", err)
	}
	got, _ := c.Get(ctx, "default", id)
	if got.State != StateDead || got.LastError != "boom 2" {
		t.Errorf("dead job = %+v", got)
	}
	if c.rdb.ZScore(ctx, qk.dead, id).Err() != nil || c.rdb.ZCard(ctx, qk.retry).Val() != 0 {
		t.Errorf("dead set lacks the job, or retry still has it")
	}
	if ttl := c.rdb.PTTL(ctx, qk.job(id)).Val(); ttl < 29*24*time.Hour {
		t.Errorf("dead job TTL %s, want ~30 days", ttl)
	}
	if err := c.Retry(ctx, "default", id); err != nil { // an operator revives it
		t.Fatalf("Retry() err = %v", err)
	}
	if state, err := c.broker().Fail(ctx, j, "resent", time.Hour); !errors.Is(err, ErrLeaseLost) && (err != nil || state != StateDead) {
		t.Errorf("Fail() resent after the job was revived = %s, %v; want dead (its first outcome) or lease lost", state, err)
	}
	if got, _ := c.Get(ctx, "default", id); got.State == StateDead || got.State == StateRetry && got.LastError == "resent" {
		t.Errorf("the resent Fail changed the revived job: %+v", got)
	}
}

func TestFailNoRetryDiesAtOnce(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a")
	j := claimOne(t, c, "default", time.Second, "w")
	if state, err := c.broker().Fail(ctx, j, "bad payload", proto.NoRetry); err != nil || state != StateDead {
		t.Fatalf("Fail(proto.NoRetry) = %s, %v; want dead", state, err)
	}
}

func TestDeadSetIsCapped(t *testing.T) {
	c := setup(t, Config{DeadMax: 3})
	var ids []string
	for range 5 {
		ids = append(ids, mustEnqueue(t, c, "a", MaxRetry(0)))
	}
	for range 5 {
		j := claimOne(t, c, "default", time.Second, "w")
		if _, err := c.broker().Fail(ctx, j, "x", 0); err != nil {
			t.Fatal(err)
		}
	}
	qk := c.keys.queue("default")
	if n := c.rdb.ZCard(ctx, qk.dead).Val(); n != 3 {
		t.Fatalf("dead set has %d, want 3", n)
	}
	if _, err := c.Get(ctx, "default", ids[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("oldest dead job still readable: %v", err)
	}
}

func TestStaleWorkerIsFenced(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "a")
	stale := claimOne(t, c, "default", 50*time.Millisecond, "w1")
	eventually(t, 2*time.Second, "lease reaped", func() bool {
		n, _ := c.broker().Reap(ctx, "default")
		return n == 1
	})
	got, _ := c.Get(ctx, "default", id)
	if got.State != StateReady || !strings.Contains(got.LastError, "lease expired: worker w1") {
		t.Fatalf("reaped job = %s %q", got.State, got.LastError)
	}
	if lost, _, _ := c.broker().Heartbeat(ctx, "default", time.Second, []*Job{stale}); len(lost) != 1 {
		t.Errorf("Heartbeat(stale) lost = %v, want [%s]", lost, id)
	}
	fresh := claimOne(t, c, "default", 10*time.Second, "w2")
	if fresh.ID != id || fresh.Attempt != 2 {
		t.Fatalf("re-claim = %s attempt %d, want %s attempt 2", fresh.ID, fresh.Attempt, id)
	}
	if err := c.broker().Ack(ctx, stale, []byte("stale")); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("stale Ack() err = %v, want ErrLeaseLost", err)
	}
	if _, err := c.broker().Fail(ctx, stale, "stale", 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("stale Fail() err = %v, want ErrLeaseLost", err)
	}
	if err := c.broker().HandBack(ctx, stale, 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("stale HandBack() err = %v, want ErrLeaseLost", err)
	}
	if err := c.broker().Ack(ctx, fresh, []byte("fresh")); err != nil {
		t.Fatalf("fresh Ack() err = %v", err)
	}
	if got, _ := c.Get(ctx, "default", id); string(got.Result) != "fresh" {
		t.Errorf("result = %q, want fresh", got.Result)
	}
}

func TestReapLastAttemptDies(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "a", MaxRetry(0))
	claimOne(t, c, "default", 20*time.Millisecond, "w1")
	eventually(t, 2*time.Second, "lease reaped", func() bool {
		n, _ := c.broker().Reap(ctx, "default")
		return n == 1
	})
	if got, _ := c.Get(ctx, "default", id); got.State != StateDead {
		t.Errorf("state = %s, want dead", got.State)
	}
}

func TestHeartbeatExtendsLease(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a")
	// Beats a third of the lease apart, as a worker's, for twice the lease: a lease of
	// 1.5s leaves a loaded machine 1s of slack per beat (600ms with beats 200ms apart
	// was reaped once at load 8-14).
	const lease = 1500 * time.Millisecond
	j := claimOne(t, c, "default", lease, "w")
	for range 6 {
		time.Sleep(lease / 3)
		lost, _, err := c.broker().Heartbeat(ctx, "default", lease, []*Job{j})
		if err != nil || len(lost) != 0 {
			t.Fatalf("Heartbeat() lost %v, err %v", lost, err)
		}
		if n, _ := c.broker().Reap(ctx, "default"); n != 0 {
			t.Fatalf("a renewed lease was reaped")
		}
	}
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Fatalf("Ack() after 3s on a 1.5s lease kept by heartbeats: %v", err)
	}
}

func TestHandBackGoesFirstWithoutCountingTheAttempt(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "a")
	mustEnqueue(t, c, "a")
	j := claimOne(t, c, "default", time.Second, "w")
	if err := c.broker().HandBack(ctx, j, 0); err != nil {
		t.Fatalf("HandBack() err = %v", err)
	}
	// Resent after a lost reply: reported handed back, nothing changed (the attempt is
	// not taken back twice, the ID not pushed twice).
	if err := c.broker().HandBack(ctx, j, 0); err != nil {
		t.Errorf("resent HandBack() err = %v, want nil", err)
	}
	if n := c.rdb.LLen(ctx, c.keys.queue("default").ready).Val(); n != 2 {
		t.Errorf("ready holds %d IDs after the resent hand back, want 2", n)
	}
	again := claimOne(t, c, "default", time.Second, "w")
	if again.ID != id || again.Attempt != 1 {
		t.Errorf("after hand back claimed %s attempt %d, want %s attempt 1", again.ID, again.Attempt, id)
	}
}

func TestEnqueueBatch(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a", ID("taken"), On("other"))
	var batch []BatchJob
	for i := range 1200 {
		q := "default"
		if i%3 == 0 {
			q = "other"
		}
		batch = append(batch, BatchJob{Type: "b", Payload: fmt.Appendf(nil, "%d", i), Options: []Option{On(q)}})
	}
	batch = append(batch, BatchJob{Type: "b", Options: []Option{On("other"), ID("taken")}})
	batch = append(batch, BatchJob{Type: "b", Options: []Option{On("other"), Delay(time.Hour)}})
	res, err := c.EnqueueBatch(ctx, batch)
	if err != nil || len(res) != len(batch) {
		t.Fatalf("EnqueueBatch() = %d results, %v", len(res), err)
	}
	if !errors.Is(res[1200].Err, ErrDuplicate) || res[1200].ID != "taken" {
		t.Errorf("duplicate result = %+v", res[1200])
	}
	for i, r := range res[:1200] {
		if r.Err != nil || r.ID == "" {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
	d := c.rdb.LLen(ctx, c.keys.queue("default").ready).Val()
	o := c.rdb.LLen(ctx, c.keys.queue("other").ready).Val()
	s := c.rdb.ZCard(ctx, c.keys.queue("other").scheduled).Val()
	if d != 800 || o != 401 || s != 1 {
		t.Errorf("ready default=%d other=%d scheduled other=%d, want 800, 401, 1", d, o, s)
	}
	if j, _ := c.Get(ctx, "default", res[1].ID); string(j.Payload) != "1" {
		t.Errorf("payload of job 1 = %q", j.Payload)
	}

	_, err = c.EnqueueBatch(ctx, []BatchJob{{Type: "ok"}, {Type: ""}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "job 1") {
		t.Errorf("EnqueueBatch(bad second) err = %v, want ErrInvalid naming job 1", err)
	}
}

func TestWaitWakesOnTokenAndTimesOut(t *testing.T) {
	c := setup(t, Config{})
	start := time.Now()
	q, token, err := c.broker().Wait(ctx, []string{"default", "other"}, 100*time.Millisecond)
	if err != nil || q != "" || token != "" {
		t.Fatalf("Wait(empty) = %q, %q, %v; want timeout", q, token, err)
	}
	// Whole seconds on one node (blockFor); the cluster waiter keeps to the timeout.
	if d := time.Since(start); d < 90*time.Millisecond || d > 1600*time.Millisecond {
		t.Errorf("Wait(100ms) took %s, want at most about 1s", d)
	}
	type woke struct {
		q, token string
		at       time.Time
	}
	done := make(chan woke)
	wait := func() {
		q, token, _ := c.broker().Wait(ctx, []string{"default", "other"}, time.Second)
		done <- woke{q, token, time.Now()}
	}
	go wait()
	time.Sleep(50 * time.Millisecond)
	mustEnqueue(t, c, "a", On("other"))
	sent := time.Now()
	if w := <-done; w.at.Sub(sent) > 200*time.Millisecond || w.q != "other" || w.token != proto.WakeReady {
		t.Errorf("woken %s after enqueue with %q from %q, want at once with %q from other", w.at.Sub(sent), w.token, w.q, proto.WakeReady)
	}
	go wait()
	mustEnqueue(t, c, "a", Delay(time.Hour))
	if w := <-done; w.q != "default" || w.token != proto.WakeScheduled {
		t.Errorf("delayed enqueue woke with %q from %q, want %q from default", w.token, w.q, proto.WakeScheduled)
	}
	if err := c.broker().Wake(ctx, "other", proto.WakeReady); err != nil {
		t.Fatal(err)
	}
	go wait()
	if w := <-done; w.q != "other" || w.token != proto.WakeReady {
		t.Errorf("Wake() then Wait() = %q from %q", w.token, w.q)
	}
}

func TestFindSearchesQueues(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "a", On("zeta"))
	mustEnqueue(t, c, "a")
	j, err := c.Find(ctx, id)
	if err != nil || j.Queue != "zeta" || j.Lease != "" {
		t.Fatalf("Find() = %+v, %v", j, err)
	}
	if _, err := c.Find(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Find(unknown) err = %v, want ErrNotFound", err)
	}
}

func TestNewIDSortsByTime(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	base := time.Now()
	var g idGen
	for i := range 1000 {
		id := g.next(base.Add(time.Duration(i) * time.Millisecond))
		if seen[id] || id <= prev {
			t.Fatalf("id %d %q: duplicate or not after %q", i, id, prev)
		}
		seen[id], prev = true, id
	}
}

func TestPayloadRoundTripsAndKeepsTheHashCompact(t *testing.T) {
	c := setup(t, Config{})
	for _, size := range []int{0, 1, 63, 64, 65, 100, 128, 129, 4096, 4097, 100_000} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i*7 + size) // binary, not UTF-8
		}
		id, err := c.Enqueue(ctx, "p", payload, On(fmt.Sprintf("q%d", size)))
		if err != nil {
			t.Fatal(err)
		}
		j, err := c.Get(ctx, fmt.Sprintf("q%d", size), id)
		if err != nil || !bytes.Equal(j.Payload, payload) {
			t.Errorf("payload of %d bytes came back as %d bytes, %v", size, len(j.Payload), err)
		}
		claimed := claimOne(t, c, fmt.Sprintf("q%d", size), time.Minute, "w")
		if !bytes.Equal(claimed.Payload, payload) {
			t.Errorf("claimed payload of %d bytes came back as %d bytes", size, len(claimed.Payload))
		}
		enc := c.rdb.ObjectEncoding(ctx, c.keys.queue(fmt.Sprintf("q%d", size)).job(id)).Val()
		if size <= 4096 && enc != "listpack" && enc != "ziplist" {
			t.Errorf("job with a %d-byte payload is %s-encoded, want listpack", size, enc)
		}
	}
}

// A job recovered from a dead worker already waited its turn: it goes to the head of
// ready, ahead of the backlog that built up behind it, and wakes an idle worker.
func TestReapedJobIsClaimedBeforeTheBacklog(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "a")
	claimOne(t, c, "default", 20*time.Millisecond, "w1")
	backlog := []string{mustEnqueue(t, c, "b"), mustEnqueue(t, c, "c")}
	qk := c.keys.queue("default")
	c.rdb.Del(ctx, qk.wake)
	eventually(t, 2*time.Second, "lease reaped", func() bool {
		n, _ := c.broker().Reap(ctx, "default")
		return n == 1
	})
	if n := c.rdb.LLen(ctx, qk.wake).Val(); n != 1 {
		t.Errorf("wake tokens after a reap = %d, want 1", n)
	}
	for _, want := range append([]string{id}, backlog...) {
		if j := claimOne(t, c, "default", time.Minute, "w2"); j.ID != want {
			t.Fatalf("claimed %s, want %s (the reaped job first, then the backlog in order)", j.ID, want)
		}
	}
}
