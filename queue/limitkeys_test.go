package queue

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
)

// Fairness: 100,000 jobs of key A (key concurrency 1) enqueued before one job of key B
// and one without a key: the first claim starts A's first job, B's and the unkeyed one,
// and no claim after it gets a second job of A while the first holds A's slot. A freed
// slot of A brings A forward and wakes one worker.
func TestKeyFairnessNoHeadOfLineBlocking(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	if err := c.SetLimit(ctx, "default", Limit{KeyConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	const nA = 100_000
	for sent := 0; sent < nA; sent += 10_000 {
		enqueueN(t, c, 10_000, LimitKey("A"))
	}
	b := enqueueN(t, c, 1, LimitKey("B"))[0]
	u := enqueueN(t, c, 1)[0]
	c.rdb.Del(ctx, qk.wake)
	jobs, _ := claimLimited(t, c, "default", 10)
	got := map[string]string{}
	for _, j := range jobs {
		got[j.ID] = j.LimitKey
	}
	if len(jobs) != 3 || got[b] != "B" || got[u] != "" {
		t.Fatalf("first claim of 10 = %v; want one job of A, B's and the unkeyed one", got)
	}
	var a *Job
	for _, j := range jobs {
		if j.LimitKey == "A" {
			a = j
		}
	}
	more, lim := claimLimited(t, c, "default", 10)
	if len(more) != 0 || lim.By != proto.LimitKeys {
		t.Fatalf("claim while A's one slot is held = %d jobs, %+v; want none, by keys", len(more), lim)
	}
	if lim.Wait < 29*time.Second || lim.Wait > 31*time.Second {
		t.Errorf("wait = %v, want about the lease (30s): A's earliest lease deadline", lim.Wait)
	}
	// Stats say the queue waits on its keys, until A's slot frees at the latest.
	st, err := c.Stats(ctx)
	if err != nil || len(st) != 1 {
		t.Fatalf("Stats() = %+v, %v", st, err)
	}
	if s := st[0]; s.Ready != nA-1 || s.KeysWaiting != 1 || s.WaitingOn != KeyWait ||
		time.Until(s.WaitingUntil) < 25*time.Second {
		t.Errorf("Stats() = %+v; want A's other jobs ready, 1 key waiting, waiting on keys for about the lease", s)
	}
	if err := c.broker().Ack(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	if n := c.rdb.LLen(ctx, qk.wake).Val(); n != 1 {
		t.Errorf("wake tokens after A's slot freed = %d, want 1", n)
	}
	more, _ = claimLimited(t, c, "default", 10)
	if len(more) != 1 || more[0].LimitKey != "A" {
		t.Fatalf("claim after A's slot freed = %d jobs; want A's next", len(more))
	}
	// A's jobs are claimed oldest first.
	if more[0].CreatedAt.Before(a.CreatedAt) {
		t.Errorf("A's second job was created before its first")
	}
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 0 {
		t.Errorf("ready holds %d jobs; keyed jobs wait in their key's list", n)
	}
}

// A crashed worker's key slot comes back at its lease deadline, with nothing to repair:
// no reap, no ack.
func TestKeySlotReturnsAtLeaseDeadline(t *testing.T) {
	c := setup(t, Config{})
	if err := c.SetLimit(ctx, "default", Limit{KeyConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 3, LimitKey("k"))
	_, jobs, _, err := c.broker().AckClaimLimited(ctx, "default", nil, nil, 3, 300*time.Millisecond, "dead")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim = %d jobs, %v; want 1", len(jobs), err)
	}
	_, more, lim, err := c.broker().AckClaimLimited(ctx, "default", nil, nil, 3, time.Minute, "w")
	if err != nil || len(more) != 0 || lim.By != proto.LimitKeys || lim.Wait > 302*time.Millisecond {
		t.Fatalf("claim while the key's slot is held = %d jobs, %+v, %v; want none, by keys, wait <= the lease", len(more), lim, err)
	}
	time.Sleep(lim.Wait + 5*time.Millisecond)
	_, more, _, err = c.broker().AckClaimLimited(ctx, "default", nil, nil, 3, time.Minute, "w")
	if err != nil || len(more) != 1 {
		t.Fatalf("claim after the dead worker's lease ran out = %d jobs, %v; want 1", len(more), err)
	}
}

// A key's own limits replace the default for it; Limits reports both, the keys waiting
// and each key's running count; RemoveKeyLimit and RemoveLimit(KeyLimit) take them away.
func TestKeyLimitsSetAndList(t *testing.T) {
	c := setup(t, Config{})
	if err := c.SetLimit(ctx, "default", Limit{KeyConcurrency: 1, KeyRate: 10, KeyPeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetKeyLimit(ctx, "default", Limit{KeyConcurrency: 3}, "big"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		l    Limit
		keys []string
	}{{Limit{KeyConcurrency: 1}, nil}, {Limit{Concurrency: 1}, []string{"x"}}, {Limit{KeyConcurrency: 1}, []string{""}},
		{Limit{KeyRate: 1}, []string{"x"}}, {Limit{KeyConcurrency: -1}, []string{"x"}}} {
		if err := c.SetKeyLimit(ctx, "default", bad.l, bad.keys...); err == nil {
			t.Errorf("SetKeyLimit(%+v, %q) = nil, want an error", bad.l, bad.keys)
		}
	}
	enqueueN(t, c, 5, LimitKey("big"))
	enqueueN(t, c, 5, LimitKey("small"))
	jobs, _ := claimLimited(t, c, "default", 10)
	n := map[string]int{}
	for _, j := range jobs {
		n[j.LimitKey]++
	}
	if n["big"] != 3 || n["small"] != 1 {
		t.Fatalf("claimed per key = %v; want big 3 (its own concurrency), small 1 (the default)", n)
	}
	ls, err := c.Limits(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	s := ls[0]
	if s.KeyConcurrency != 1 || s.KeyRate != 10 || s.KeyPeriod != time.Second || s.KeysWaiting != 2 {
		t.Fatalf("Limits = %+v; want key concurrency 1, key rate 10/1s, 2 keys waiting", s)
	}
	byKey := map[string]KeyStatus{}
	for _, k := range s.Keys {
		byKey[k.Key] = k
	}
	if k := byKey["big"]; !k.Own || k.KeyConcurrency != 3 || k.KeyRate != 0 || k.Running != 3 || !k.Ready || k.NextSlot.IsZero() {
		t.Errorf("big = %+v; want own concurrency 3, 3 running, ready, a next slot", k)
	}
	if k := byKey["small"]; k.Own || k.KeyConcurrency != 1 || k.Running != 1 || k.NextSlot.IsZero() {
		t.Errorf("small = %+v; want the default, 1 running, a next slot", k)
	}
	if err := c.RemoveKeyLimit(ctx, "default", "big"); err != nil {
		t.Fatal(err)
	}
	if ls, _ := c.Limits(ctx, "default"); len(ls[0].Keys) != 2 || ls[0].Keys[0].Own || ls[0].Keys[1].Own {
		t.Errorf("after RemoveKeyLimit(big): keys = %+v; want none with its own limits", ls[0].Keys)
	}
	if err := c.RemoveLimit(ctx, "default", KeyLimit); err != nil {
		t.Fatal(err)
	}
	if ls, _ := c.Limits(ctx); len(ls) != 1 || ls[0].KeyConcurrency != 0 {
		t.Errorf("after RemoveLimit(KeyLimit): %+v; want the queue listed (keys waiting), no key limits", ls)
	}
}

// A key's rate is GCRA as the queue's, per key: one key's spent tokens hold back no other.
func TestKeyRate(t *testing.T) {
	c := setup(t, Config{})
	if err := c.SetLimit(ctx, "default", Limit{KeyRate: 2, KeyPeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 5, LimitKey("a"))
	enqueueN(t, c, 5, LimitKey("b"))
	jobs, lim := claimLimited(t, c, "default", 10)
	if len(jobs) != 2 || jobs[0].LimitKey == jobs[1].LimitKey {
		t.Fatalf("claim = %d jobs; want one of each key (rate 2/s burst 1)", len(jobs))
	}
	if lim.By != proto.LimitKeys || lim.Wait < 400*time.Millisecond || lim.Wait > 501*time.Millisecond {
		t.Errorf("limit = %+v; want by keys, about 500ms to the next token", lim)
	}
	time.Sleep(lim.Wait)
	if jobs, _ := claimLimited(t, c, "default", 10); len(jobs) != 2 {
		t.Errorf("claim at the next token = %d jobs, want 2", len(jobs))
	}
}

// The model test of TestConcurrencyLimitModel with keyed jobs: random claims, acks, fails,
// hand backs, heartbeats, leases running out, reaps and cancels of jobs of three keys and
// none, under key concurrency 2. After every step: unexpired leases per key never exceed
// 2, every unexpired lease of a key belongs to an active job of that key (no orphan),
// every ready keyed job is in its key's list and its key in the ring (none lost), and the
// ring holds only keys with jobs. With queue concurrency 5 (a claim counts a key's leases
// only when its limit could bind, given the queue's unexpired leases: pop_keyed), 1 (a
// key's limit never binds: never counted) and none (the queue's leases bounded by ZCARD
// of active).
func TestKeyLimitModel(t *testing.T) {
	for _, queueLimit := range []int{5, 1, 0} {
		t.Run("queue concurrency "+strconv.Itoa(queueLimit), func(t *testing.T) { keyLimitModel(t, queueLimit) })
	}
}

func keyLimitModel(t *testing.T, queueLimit int) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	base := qk.jobPrefix[:len(qk.jobPrefix)-len("job:")]
	const keyLimit, steps = 2, 1500
	if err := c.SetLimit(ctx, "default", Limit{Concurrency: queueLimit, KeyConcurrency: keyLimit}); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	t.Logf("seed %d", seed)
	keys := []string{"a", "b", "c", ""}
	enqueue := func(n int) {
		k := keys[rng.IntN(len(keys))]
		opts := []Option{MaxRetry(1000)}
		if k != "" {
			opts = append(opts, LimitKey(k))
		}
		enqueueN(t, c, n, opts...)
	}
	var held []*Job
	for range 4 {
		enqueue(5)
	}
	for step := range steps {
		what := modelStep(t, c, rng, &held, enqueue)
		if what == "" {
			continue
		}
		now := c.rdb.Time(ctx).Val().UnixMilli()
		after := "(" + strconv.FormatInt(now, 10)
		for _, k := range keys[:3] {
			act := base + "kactive:" + k
			if n := c.rdb.ZCount(ctx, act, after, "+inf").Val(); n > keyLimit {
				t.Fatalf("step %d (%s): key %s has %d unexpired leases, limit %d", step, what, k, n, keyLimit)
			}
			for _, id := range c.rdb.ZRangeByScore(ctx, act, &redis.ZRangeBy{Min: after, Max: "+inf"}).Val() {
				h := c.rdb.HMGet(ctx, qk.job(id), "state", "limit_key").Val()
				if h[0] != "active" || h[1] != k {
					t.Fatalf("step %d (%s): job %s leased under key %s is %v: an orphan lease", step, what, id, k, h)
				}
			}
			list := c.rdb.LRange(ctx, base+"kready:"+k, 0, -1).Val()
			inRing := c.rdb.ZScore(ctx, base+"keys", k).Err() == nil
			if len(list) > 0 != inRing {
				t.Fatalf("step %d (%s): key %s has %d jobs ready, in the ring: %v", step, what, k, len(list), inRing)
			}
		}
		var cursor uint64
		for {
			ks, next := c.rdb.Scan(ctx, cursor, qk.jobPrefix+"*", 1000).Val()
			for _, key := range ks {
				h := c.rdb.HMGet(ctx, key, "state", "limit_key").Val()
				if h[0] != "ready" || h[1] == nil {
					continue
				}
				id := key[len(qk.jobPrefix):]
				if c.rdb.LPos(ctx, base+"kready:"+h[1].(string), id, redis.LPosArgs{}).Err() != nil {
					t.Fatalf("step %d (%s): ready job %s of key %v is not in its key's list: lost", step, what, id, h[1])
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
}

// A keyed job that waited for a dependency becomes ready under its key (its key's list,
// the key in the ring), not in ready, and obeys its key's limits.
func TestKeyedDependentReadyUnderItsKey(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	if err := c.SetLimit(ctx, "default", Limit{KeyConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	first := enqueueN(t, c, 1)[0]
	dep, err := c.Enqueue(ctx, "t", nil, AfterJob("default", first), LimitKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := claimLimited(t, c, "default", 5)
	if len(jobs) != 1 || jobs[0].ID != first {
		t.Fatalf("claim = %d jobs; want the dependency alone", len(jobs))
	}
	if err := c.broker().Ack(ctx, jobs[0], nil); err != nil {
		t.Fatal(err)
	}
	base := qk.jobPrefix[:len(qk.jobPrefix)-len("job:")]
	if l := c.rdb.LRange(ctx, base+"kready:k", 0, -1).Val(); len(l) != 1 || l[0] != dep {
		t.Errorf("key k's list = %v, want the dependent %s", l, dep)
	}
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 0 {
		t.Errorf("ready holds %d jobs, want none (the dependent has a limit key)", n)
	}
	if jobs, _ := claimLimited(t, c, "default", 5); len(jobs) != 1 || jobs[0].ID != dep {
		t.Errorf("claim after the dependency ended = %d jobs; want the dependent", len(jobs))
	}
}

// A key's rate takes its tokens ahead as the queue's does (rate_ahead in scripts/lib): a
// claim gets the tokens due within 20ms, each job starting at its token's instant, and
// the key is due again 20ms before its next token. Not under a queue rate: a job held
// for its key's token would start after its queue token's instant, and the queue's
// starts could bunch up.
func TestKeyRateTokensAhead(t *testing.T) {
	c := setup(t, Config{})
	if err := c.SetLimit(ctx, "default", Limit{KeyRate: 100, KeyPeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 10, LimitKey("a"))
	jobs, lim := claimLimited(t, c, "default", 10)
	// tau 10ms, burst 1: the token due now and the two due within 20ms.
	if len(jobs) != 3 {
		t.Fatalf("claim under key rate 100/s = %d jobs; want 3 (the tokens due within 20ms)", len(jobs))
	}
	for i, j := range jobs {
		if d := j.StartedAt.Sub(jobs[0].StartedAt); d != time.Duration(i)*10*time.Millisecond {
			t.Errorf("job %d starts %v after the first; want %v (its token's instant)", i, d, time.Duration(i)*10*time.Millisecond)
		}
	}
	// The next token is due 30ms after the first start: the key 20ms before it.
	if lim.By != proto.LimitKeys || lim.Wait <= 0 || lim.Wait > 10*time.Millisecond {
		t.Errorf("limit = %+v; want by keys, at most 10ms (20ms before the next token)", lim)
	}
	time.Sleep(lim.Wait)
	more, _ := claimLimited(t, c, "default", 10)
	if len(more) == 0 || more[0].StartedAt.Sub(jobs[0].StartedAt) != 30*time.Millisecond {
		t.Fatalf("claim when the key is due = %d jobs; want the next token's job, starting 30ms after the first", len(more))
	}

	// Under a queue rate, a key's tokens are taken when due only.
	l := Limit{Rate: 1000, Period: time.Second, Burst: 100, KeyRate: 100, KeyPeriod: time.Second}
	if err := c.SetLimit(ctx, "other", l); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := c.Enqueue(ctx, "t", nil, On("other"), LimitKey("b")); err != nil {
			t.Fatal(err)
		}
	}
	if jobs, _ := claimLimited(t, c, "other", 10); len(jobs) != 1 {
		t.Errorf("claim under key rate 100/s and a queue rate = %d jobs; want 1 (no key token ahead)", len(jobs))
	}
}

// A key's rate holds for its jobs' starts under a queue rate too: a job claimed ahead for
// the queue's token starts at that token's instant, up to 20ms after the claim, and its
// key's next token counts from that start, not from the claim. Key rate 40/s, burst 1:
// no two starts of the key closer than 25ms.
func TestKeyRateUnderQueueRateCountsFromStart(t *testing.T) {
	c := setup(t, Config{})
	l := Limit{Rate: 50, Period: time.Second, KeyRate: 40, KeyPeriod: time.Second}
	if err := c.SetLimit(ctx, "default", l); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 30, LimitKey("a"))
	enqueueN(t, c, 30, LimitKey("b")) // another key takes queue tokens too: the queue's rate binds
	var starts []time.Time
	for i, end := 0, time.Now().Add(800*time.Millisecond); time.Now().Before(end); i++ {
		jobs, lim := claimLimited(t, c, "default", 10)
		for _, j := range jobs {
			if j.LimitKey == "a" {
				starts = append(starts, j.StartedAt)
			}
		}
		// Claims at every offset from the queue's tokens: some early, some late (a late one
		// took the key's token long before its job's start).
		time.Sleep(min(max(lim.Wait, time.Millisecond), 10*time.Millisecond) + time.Duration(i%5)*5*time.Millisecond)
	}
	if len(starts) < 6 {
		t.Fatalf("%d jobs of key a started in 800ms under key rate 40/s and queue rate 50/s, want about 15", len(starts))
	}
	for i := 1; i < len(starts); i++ {
		if d := starts[i].Sub(starts[i-1]); d < 25*time.Millisecond-time.Millisecond {
			t.Errorf("starts %d and %d of key a %v apart, want at least 25ms (its rate, 40/s)", i-1, i, d)
		}
	}
}
