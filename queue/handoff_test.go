package queue

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
)

// register makes w a waiter of queue q the way a worker's dry claim does.
func register(t *testing.T, c *Client, q string, w *proto.Waiter) {
	t.Helper()
	_, jobs, _, registered, err := c.broker().AckClaimWaiting(ctx, q, nil, nil, 5, w.Lease, w.Worker, w)
	if err != nil || len(jobs) != 0 || !registered {
		t.Fatalf("AckClaimWaiting(empty queue) = %v, registered %v, err %v; want nothing, registered", jobs, registered, err)
	}
	// The set ends with its latest registration: workers that all died leave nothing.
	if ttl, err := c.rdb.PTTL(ctx, c.keys.queue(q).waiters).Result(); err != nil || ttl <= 0 || ttl > proto.WaiterFor {
		t.Fatalf("waiters PTTL = %v, %v; want at most %v", ttl, err, proto.WaiterFor)
	}
}

// handList returns the entries of w's hand list on q.
func handList(t *testing.T, c *Client, q string, w *proto.Waiter) []string {
	t.Helper()
	got, err := c.rdb.LRange(ctx, c.keys.queue(q).hand(w.Worker), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A job enqueued while a worker waits is claimed for it in the enqueue: its wait returns
// the job, claimed exactly as its own claim would (attempt, worker, lease in active, the
// started event), no wake token pushed, and its lease fences heartbeats and acks as any.
func TestHandOffClaimsTheJobForTheWaiter(t *testing.T) {
	c := setup(t, Config{DoneRetention: -1})
	w := c.broker().Waiter("w1", 30*time.Second)
	register(t, c, "default", &w)
	id := mustEnqueue(t, c, "a")

	q, token, job, err := c.broker().WaitHanded(ctx, []string{"default"}, time.Second, &w)
	if err != nil || q != "default" || token != "" || job == nil {
		t.Fatalf("WaitHanded() = %q, %q, %v, %v; want the handed job", q, token, job, err)
	}
	if job.ID != id || job.Attempt != 1 || job.Worker != "w1" || job.State != StateActive || job.Type != "a" ||
		string(job.Payload) != `{"n":1}` || !strings.HasPrefix(job.Lease, strings.Split(w.Member, "\t")[1]+".") {
		t.Errorf("handed job = %+v", job)
	}
	if got, err := c.Get(ctx, "default", id); err != nil || got.State != StateActive || got.Worker != "w1" ||
		got.Attempt != 1 || !got.StartedAt.Equal(job.StartedAt.Truncate(time.Millisecond)) {
		t.Errorf("handed job in Redis = %+v, %v; want active for w1, as handed", got, err)
	}
	deadline, err := c.rdb.ZScore(ctx, c.keys.queue("default").active, id).Result()
	if lease := time.UnixMilli(int64(deadline)).Sub(job.StartedAt); err != nil || lease < 29*time.Second || lease > 31*time.Second {
		t.Errorf("lease deadline %v after the start (err %v), want the waiter's 30s", lease, err)
	}
	if n, _ := c.rdb.LLen(ctx, c.keys.queue("default").wake).Result(); n != 0 {
		t.Errorf("wake list holds %d tokens after a hand-off, want 0", n)
	}
	var names []string
	for _, e := range readEvents(t, c, []string{"default"}, "0", 2) {
		names = append(names, summary(e))
	}
	if want := []string{"enqueued " + id + " 0 ", "started " + id + " 1 w1"}; strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("events = %q, want %q", names, want)
	}

	stale := *job
	stale.Lease += "x"
	if lost, _, err := c.broker().Heartbeat(ctx, "default", time.Minute, []*Job{job, &stale}); err != nil ||
		len(lost) != 1 || lost[0] != stale.Lease {
		t.Errorf("Heartbeat(handed, stale) lost = %v, %v; want only the stale lease lost", lost, err)
	}
	if err := c.broker().Ack(ctx, &stale, nil); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Ack(stale lease) err = %v, want ErrLeaseLost", err)
	}
	if err := c.broker().Ack(ctx, job, nil); err != nil {
		t.Errorf("Ack(handed) err = %v", err)
	}
}

// Two workers wait, two jobs come: each gets one, and a third goes to ready with a
// wake token (nobody is registered any more).
func TestHandOffOneJobPerWaiter(t *testing.T) {
	c := setup(t, Config{})
	w1, w2 := c.broker().Waiter("w1", time.Minute), c.broker().Waiter("w2", time.Minute)
	register(t, c, "default", &w1)
	register(t, c, "default", &w2)
	a, b, third := mustEnqueue(t, c, "a"), mustEnqueue(t, c, "a"), mustEnqueue(t, c, "a")
	got := map[string]string{}
	for _, w := range []*proto.Waiter{&w1, &w2} {
		_, _, job, err := c.broker().WaitHanded(ctx, []string{"default"}, time.Second, w)
		if err != nil || job == nil {
			t.Fatalf("WaitHanded(%s) = %v, %v; want a job", w.Worker, job, err)
		}
		got[job.ID] = w.Worker
		if rest := handList(t, c, "default", w); len(rest) != 0 {
			t.Errorf("%s's hand list holds %d more", w.Worker, len(rest))
		}
	}
	if len(got) != 2 || got[a] == "" || got[b] == "" {
		t.Errorf("handed %v, want %s and %s one each", got, a, b)
	}
	if ready, _ := c.rdb.LRange(ctx, c.keys.queue("default").ready, 0, -1).Result(); len(ready) != 1 || ready[0] != third {
		t.Errorf("ready = %v, want [%s]", ready, third)
	}
	if n, _ := c.rdb.LLen(ctx, c.keys.queue("default").wake).Result(); n != 1 {
		t.Errorf("wake list holds %d tokens, want 1 for the job not handed", n)
	}
}

// No hand-off on a queue that is paused, has limits, or has keyed jobs waiting (they
// keep the claim's checks), nor when ready is not empty (a busy queue), nor to a waiter
// whose registration expired.
func TestHandOffOnlyToAnIdleQueueWithoutLimits(t *testing.T) {
	cases := map[string]func(t *testing.T, c *Client){
		"paused": func(t *testing.T, c *Client) {
			if err := c.Pause(ctx, "default"); err != nil {
				t.Fatal(err)
			}
		},
		"limited": func(t *testing.T, c *Client) {
			if err := c.SetLimit(ctx, "default", Limit{Concurrency: 100}); err != nil {
				t.Fatal(err)
			}
		},
		"keyed jobs waiting": func(t *testing.T, c *Client) { mustEnqueue(t, c, "k", LimitKey("acct")) },
		"ready not empty": func(t *testing.T, c *Client) {
			if err := c.rdb.LPush(ctx, c.keys.queue("default").ready, "01J000000000000000000000ZZ").Err(); err != nil {
				t.Fatal(err)
			}
		},
		"registration expired": func(t *testing.T, c *Client) {
			w := c.broker().Waiter("w1", time.Minute)
			if err := c.rdb.ZAdd(ctx, c.keys.queue("default").waiters,
				redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: w.Member}).Err(); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, prepare := range cases {
		t.Run(name, func(t *testing.T) {
			c := setup(t, Config{})
			w := c.broker().Waiter("w1", time.Minute)
			if name != "registration expired" {
				register(t, c, "default", &w)
			}
			prepare(t, c)
			id := mustEnqueue(t, c, "a")
			if got := handList(t, c, "default", &w); len(got) != 0 {
				t.Fatalf("hand list = %d entries, want none", len(got))
			}
			if j, err := c.Get(ctx, "default", id); err != nil || j.State != StateReady {
				t.Errorf("job = %+v, %v; want ready", j, err)
			}
			if n, _ := c.rdb.LLen(ctx, c.keys.queue("default").wake).Result(); n == 0 {
				t.Errorf("no wake token for a job not handed")
			}
			if name == "registration expired" {
				if n, _ := c.rdb.Exists(ctx, c.keys.queue("default").waiters).Result(); n != 0 {
					t.Errorf("waiters set kept after its last registration expired")
				}
			}
		})
	}
}

// A job handed while the worker was claiming anyway is in its next claim's reply (the
// claim drains the hand list); a claim that finds jobs takes the registration out, and
// a job enqueued then is not handed.
func TestHandOffDrainedByTheNextClaim(t *testing.T) {
	c := setup(t, Config{})
	w := c.broker().Waiter("w1", time.Minute)
	register(t, c, "default", &w)
	handedID := mustEnqueue(t, c, "a")
	ready := mustEnqueue(t, c, "a") // nobody registered now: to ready
	_, jobs, _, registered, err := c.broker().AckClaimWaiting(ctx, "default", nil, nil, 1, time.Minute, "w1", &w)
	if err != nil || len(jobs) != 2 || jobs[0].ID != ready || jobs[1].ID != handedID || registered {
		t.Fatalf("AckClaimWaiting(1) = %v, registered %v, %v; want %s claimed, %s drained, not registered",
			jobs, registered, err, ready, handedID)
	}
	if jobs[1].Attempt != 1 || jobs[1].Worker != "w1" || jobs[1].Lease == jobs[0].Lease {
		t.Errorf("drained job = %+v", jobs[1])
	}
	if got := handList(t, c, "default", &w); len(got) != 0 {
		t.Errorf("hand list after the claim = %d entries, want none", len(got))
	}
	if n, _ := c.rdb.ZCard(ctx, c.keys.queue("default").waiters).Result(); n != 0 {
		t.Errorf("waiters = %d after a claim that found jobs, want 0", n)
	}
	mustEnqueue(t, c, "a")
	if got := handList(t, c, "default", &w); len(got) != 0 {
		t.Errorf("a job was handed to a worker whose registration was taken out")
	}
}

// A waiter that never pops its hand list (it died) costs the job its lease, not the
// job: the reaper puts it back, and it runs again.
func TestHandOffToADeadWaiterIsReaped(t *testing.T) {
	c := setup(t, Config{})
	w := c.broker().Waiter("ghost", 200*time.Millisecond)
	register(t, c, "default", &w)
	id := mustEnqueue(t, c, "a")
	if got := handList(t, c, "default", &w); len(got) != 1 {
		t.Fatalf("hand list = %d entries, want the job", len(got))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := c.broker().Reap(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the handed job's lease was never reaped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := handList(t, c, "default", &w); len(got) != 0 {
		t.Errorf("hand list outlived the lease: %d entries", len(got))
	}
	jobs, err := c.broker().Claim(ctx, "default", 1, time.Minute, "w2")
	if err != nil || len(jobs) != 1 || jobs[0].ID != id || jobs[0].Attempt != 2 {
		t.Errorf("Claim() after the reap = %v, %v; want %s, attempt 2", jobs, err, id)
	}
}

// A hand list entry that is not one is refused with errBadReply, never a panic.
func TestDecodeHandRefusesGarbage(t *testing.T) {
	for _, entry := range []string{"", "x", "3:abc", "99:abc", "-1:", "1:t2:12", "1:t1:51:a1:b1:i1:x1:11:1"} {
		if _, err := decodeHand("q", "w", entry); !errors.Is(err, errBadReply) {
			t.Errorf("decodeHand(%q) err = %v, want errBadReply", entry, err)
		}
	}
}

// On a cluster, a BLPOP that outlives its Wait and pops a handed job pushes it back on
// the hand list: the worker's next claim drains it.
func TestClusterHandedJobPoppedLateIsKept(t *testing.T) {
	if !redistest.ClusterMode() {
		t.Skip("cluster waits only")
	}
	c := setup(t, Config{})
	w := c.broker().Waiter("w1", time.Minute)
	queues := []string{"q1", "q2"}
	register(t, c, "q1", &w)
	// The Wait gives up at once; its BLPOPs run on for up to a second.
	if q, token, job, err := c.broker().WaitHanded(ctx, queues, time.Millisecond, &w); err != nil || token != "" || job != nil {
		t.Fatalf("WaitHanded() = %q, %q, %v, %v; want a timeout", q, token, job, err)
	}
	id := mustEnqueue(t, c, "a", On("q1"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, jobs, _, _, err := c.broker().AckClaimWaiting(ctx, "q1", nil, nil, 1, time.Minute, "w1", &w)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 1 && jobs[0].ID == id && jobs[0].Worker == "w1" {
			return
		}
		if len(jobs) != 0 || time.Now().After(deadline) {
			t.Fatalf("claims = %v; want the handed job %s back", jobs, id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A handed job's hash and the Job its worker gets are those of a claim of one, whatever
// the payload's size (one piece, several, one large field) and options: the hand-off
// writes the hash once, already claimed, and builds the hand entry from what it wrote,
// with nothing read back. The ready list it pushed on and took the job off again is gone.
func TestHandOffWritesWhatAClaimWrites(t *testing.T) {
	c := setup(t, Config{DoneRetention: -1})
	qk := c.keys.queue("default")
	// Fields a claim sets per call, not from the job: compared by their shape below.
	perCall := []string{"lease", "started_at", "created_at"}
	for _, size := range []int{0, 64, 100, 200, 5000} {
		payload := []byte(strings.Repeat("p", size))
		for _, opts := range [][]Option{nil, {MaxRetry(3), Timeout(time.Minute)}} {
			claimedID, err := c.Enqueue(ctx, "t", payload, opts...)
			if err != nil {
				t.Fatal(err)
			}
			claimed := claimOne(t, c, "default", 30*time.Second, "w1")
			c.rdb.Del(ctx, qk.wake) // the claimed job's token, which no Wait took
			w := c.broker().Waiter("w1", 30*time.Second)
			register(t, c, "default", &w)
			handedID, err := c.Enqueue(ctx, "t", payload, opts...)
			if err != nil {
				t.Fatal(err)
			}
			_, _, handed, err := c.broker().WaitHanded(ctx, []string{"default"}, time.Second, &w)
			if err != nil || handed == nil || handed.ID != handedID {
				t.Fatalf("payload %d, %d options: WaitHanded() = %v, %v; want the handed job", size, len(opts), handed, err)
			}
			a, b := c.rdb.HGetAll(ctx, qk.job(claimedID)).Val(), c.rdb.HGetAll(ctx, qk.job(handedID)).Val()
			for _, f := range perCall {
				if (a[f] == "") != (b[f] == "") {
					t.Errorf("payload %d, %d options: field %s claimed %q, handed %q", size, len(opts), f, a[f], b[f])
				}
				delete(a, f)
				delete(b, f)
			}
			if !maps.Equal(a, b) {
				t.Errorf("payload %d, %d options: claimed job's hash %v, handed job's %v; want the same", size, len(opts), a, b)
			}
			if !bytes.Equal(handed.Payload, payload) || handed.Type != claimed.Type || handed.MaxRetry != claimed.MaxRetry ||
				handed.Timeout != claimed.Timeout || handed.Attempt != 1 || handed.Worker != "w1" ||
				handed.State != StateActive || !handed.CreatedAt.Equal(handed.CreatedAt.Truncate(time.Millisecond)) {
				t.Errorf("payload %d, %d options: handed %+v, claimed %+v", size, len(opts), handed, claimed)
			}
			if n := c.rdb.Exists(ctx, qk.ready, qk.wake).Val(); n != 0 {
				t.Errorf("payload %d, %d options: ready or wake exists after a hand-off", size, len(opts))
			}
			for _, j := range []*Job{claimed, handed} {
				if err := c.broker().Ack(ctx, j, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// A hand-off that Redis refuses writes nothing and leaves the waiter registered: on a full
// Redis (the hand list's LPUSH is the call's first write, which Redis at maxmemory
// refuses) and with a wrong-typed events stream (its XADD fails after the LPUSH, which is
// taken back).
func TestHandOffRefusedWritesNothing(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("starts its own single redis-server")
	}
	c := fullRedisClient(t, "3mb", "mm")
	qk := c.keys.queue("idle")
	w := c.broker().Waiter("w1", 30*time.Second)
	register(t, c, "idle", &w)
	nothingWritten := func(what string) {
		t.Helper()
		if n := c.rdb.Exists(ctx, qk.ready, qk.wake, qk.active, qk.hand(w.Worker)).Val(); n != 0 {
			t.Errorf("%s: %d of ready, wake, active and the hand list exist, want none", what, n)
		}
		if keys := c.rdb.Keys(ctx, qk.jobPrefix+"*").Val(); len(keys) != 0 {
			t.Errorf("%s: job hashes %v written", what, keys)
		}
		if n := c.rdb.ZCard(ctx, qk.waiters).Val(); n != 1 {
			t.Errorf("%s: %d waiters registered, want the one, still", what, n)
		}
	}

	c.rdb.Set(ctx, qk.events, "not a stream", 0)
	if _, err := c.Enqueue(ctx, "a", nil, On("idle")); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Enqueue() with events of the wrong type err = %v, want WRONGTYPE", err)
	}
	nothingWritten("events of the wrong type")
	c.rdb.Del(ctx, qk.events)

	// Filled by jobs of the size of the one handed, on default (its ready is not empty
	// after the first). The fill takes longer than a registration lasts
	// (proto.WaiterFor) on a loaded machine: the worker registers again, with the limit
	// lifted for that one call, and then set below what Redis holds, so that it is full
	// whatever the fill left (noeviction).
	fill(t, c, "fill")
	setMaxmemory := func(v string) {
		t.Helper()
		if err := c.rdb.ConfigSet(ctx, "maxmemory", v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	setMaxmemory("0")
	register(t, c, "idle", &w)
	setMaxmemory("2mb")
	payload := []byte(strings.Repeat("p", 200))
	if _, err := c.Enqueue(ctx, "fill", payload, On("idle")); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("Enqueue() on a full Redis with a waiter err = %v, want Redis's OOM refusal", err)
	}
	nothingWritten("full Redis")

	// The refusals above were the hand-off's: with room, the same enqueue hands the job
	// to the waiter.
	setMaxmemory("0")
	if _, err := c.Enqueue(ctx, "fill", payload, On("idle")); err != nil {
		t.Fatal(err)
	}
	if got := handList(t, c, "idle", &w); len(got) != 1 {
		t.Errorf("hand list after an enqueue with room = %d entries, want the job handed", len(got))
	}
}
