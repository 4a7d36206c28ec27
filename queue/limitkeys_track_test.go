package queue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
)

// keyLeases reads the limits' ktrack flag and the lease sets of the keys given (by key;
// absent when Redis has none).
func keyLeases(t *testing.T, c *Client, keys ...string) (bool, map[string][]redis.Z) {
	t.Helper()
	qk := c.keys.queue("default")
	base := qk.jobPrefix[:len(qk.jobPrefix)-len("job:")]
	out := map[string][]redis.Z{}
	for _, k := range keys {
		if z := c.rdb.ZRangeWithScores(ctx, base+"kactive:"+k, 0, -1).Val(); len(z) > 0 {
			out[k] = z
		}
	}
	return c.rdb.HGet(ctx, qk.limit, "ktrack").Val() == "1", out
}

// activeByKey is the truth the keys' lease sets must hold while they are kept: the leases
// in active (expired ones too, until reaped) of each key's jobs, ID -> deadline.
func activeByKey(t *testing.T, c *Client) map[string]map[string]float64 {
	t.Helper()
	qk := c.keys.queue("default")
	out := map[string]map[string]float64{}
	for _, z := range c.rdb.ZRangeWithScores(ctx, qk.active, 0, -1).Val() {
		id := z.Member.(string)
		k := c.rdb.HGet(ctx, qk.job(id), "limit_key").Val()
		if k == "" {
			continue
		}
		if out[k] == nil {
			out[k] = map[string]float64{}
		}
		out[k][id] = z.Score
	}
	return out
}

// The keys' leases are kept only while some key's concurrency could bind (ktrack): none
// set, or none below the queue's concurrency, keeps none. Turned on live, every key's
// lease set is rebuilt from the jobs running, so the next claim counts them; a heartbeat
// renews them and a lease that runs out frees its slot; turned off, they are deleted.
func TestKeyLeasesKeptWhileAKeyLimitCanBind(t *testing.T) {
	c := setup(t, Config{})
	enqueueN(t, c, 5, LimitKey("a"))
	running, _ := claimLimited(t, c, "default", 3)
	if len(running) != 3 {
		t.Fatalf("claim without limits = %d jobs, want 3", len(running))
	}
	if on, sets := keyLeases(t, c, "a"); on || len(sets) != 0 {
		t.Fatalf("without limits: ktrack %v, lease sets %v; want none", on, sets)
	}
	// Limits counts a key's running jobs from active then.
	st, err := c.KeyLimits(ctx, "default", "a")
	if err != nil || len(st.Keys) != 1 || st.Keys[0].Running != 3 {
		t.Fatalf("KeyLimits(a) without kept leases = %+v, %v; want a with 3 running", st.Keys, err)
	}
	if err := c.SetLimit(ctx, "default", Limit{Concurrency: 10, KeyConcurrency: 10}); err != nil {
		t.Fatal(err)
	}
	if on, sets := keyLeases(t, c, "a"); on || len(sets) != 0 {
		t.Fatalf("key concurrency 10 = queue's 10 (cannot bind): ktrack %v, lease sets %v; want none", on, sets)
	}

	// Key concurrency 3 < 10: on, and a's three running jobs count at once.
	if err := c.SetLimit(ctx, "default", Limit{KeyConcurrency: 3}); err != nil {
		t.Fatal(err)
	}
	on, sets := keyLeases(t, c, "a")
	if !on || len(sets["a"]) != 3 {
		t.Fatalf("key concurrency 3 set on 3 running jobs: ktrack %v, a's leases %v; want on, 3", on, sets["a"])
	}
	for _, z := range sets["a"] {
		if d := c.rdb.ZScore(ctx, c.keys.queue("default").active, z.Member.(string)).Val(); d != z.Score {
			t.Errorf("job %v: key lease deadline %v, active's %v; want the same", z.Member, z.Score, d)
		}
	}
	if more, lim := claimLimited(t, c, "default", 5); len(more) != 0 || lim.By != proto.LimitKeys {
		t.Fatalf("claim with a's 3 slots held = %d jobs, %+v; want none, by keys", len(more), lim)
	}
	// A heartbeat moves the key's leases with active's.
	if _, _, err := c.broker().Heartbeat(ctx, "default", 2*time.Minute, running); err != nil {
		t.Fatal(err)
	}
	_, sets = keyLeases(t, c, "a")
	for _, z := range sets["a"] {
		if d := c.rdb.ZScore(ctx, c.keys.queue("default").active, z.Member.(string)).Val(); d != z.Score {
			t.Errorf("after a heartbeat, job %v: key lease deadline %v, active's %v; want the same", z.Member, z.Score, d)
		}
	}
	// A worker that died: its lease runs out, its key slot is free, the reap ends it.
	dead := running[0]
	qk := c.keys.queue("default")
	base := qk.jobPrefix[:len(qk.jobPrefix)-len("job:")]
	c.rdb.ZAddXX(ctx, qk.active, redis.Z{Score: 1, Member: dead.ID})
	c.rdb.ZAddXX(ctx, base+"kactive:a", redis.Z{Score: 1, Member: dead.ID})
	c.rdb.ZAdd(ctx, base+"keys", redis.Z{Score: 0, Member: "a"}) // due: as a key_freed would
	more, _ := claimLimited(t, c, "default", 5)
	if len(more) != 1 {
		t.Fatalf("claim after one of a's leases ran out = %d jobs, want 1", len(more))
	}
	if _, err := c.broker().Reap(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if _, sets = keyLeases(t, c, "a"); len(sets["a"]) != 3 {
		t.Errorf("a's leases after the reap = %v; want the 3 running (the dead one gone)", sets["a"])
	}

	// An own key limit below the queue's keeps them too; kown says some key has one.
	if err := c.RemoveLimit(ctx, "default", KeyLimit); err != nil {
		t.Fatal(err)
	}
	if on, sets := keyLeases(t, c, "a"); on || len(sets) != 0 {
		t.Fatalf("key limits removed: ktrack %v, lease sets %v; want none", on, sets)
	}
	if err := c.SetKeyLimit(ctx, "default", Limit{KeyConcurrency: 1}, "b"); err != nil {
		t.Fatal(err)
	}
	if on, sets := keyLeases(t, c, "a"); !on || len(sets["a"]) != 3 || c.rdb.HGet(ctx, qk.limit, "kown").Val() != "1" {
		t.Fatalf("b's own concurrency 1: ktrack %v, a's leases %v, kown %q; want on, 3, 1", on, sets["a"],
			c.rdb.HGet(ctx, qk.limit, "kown").Val())
	}
	if err := c.RemoveLimit(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if n := c.rdb.Exists(ctx, qk.limit, base+"kactive:a").Val(); n != 0 {
		t.Errorf("every limit removed: %d of the limits hash and a's lease set left, want none", n)
	}
}

// A key its concurrency held back in the ring runs at the next claim once no key
// concurrency can bind any more (limit.lua brings it forward), not at its lease deadline.
func TestKeyHeldByConcurrencyRunsWhenTheLimitGoes(t *testing.T) {
	c := setup(t, Config{})
	if err := c.SetLimit(ctx, "default", Limit{KeyConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 2, LimitKey("a"))
	if jobs, _ := claimLimited(t, c, "default", 2); len(jobs) != 1 {
		t.Fatalf("claim under key concurrency 1 = %d jobs, want 1", len(jobs))
	}
	if jobs, lim := claimLimited(t, c, "default", 2); len(jobs) != 0 || lim.Wait < time.Second {
		t.Fatalf("claim with a's slot held = %d jobs, %+v; want none, until about its lease", len(jobs), lim)
	}
	if err := c.RemoveLimit(ctx, "default", KeyLimit); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := claimLimited(t, c, "default", 2); len(jobs) != 1 {
		t.Fatalf("claim after the key limit went = %d jobs, want a's second", len(jobs))
	}
}

// The keys' model test with the limits changed live at random between limits whose key
// concurrency can bind (kept leases) and limits where none can (no leases kept): after
// every step, while ktrack is on every key's lease set holds exactly its jobs' leases in
// active, and none exists while it is off; a key's unexpired leases never grow past its
// concurrency (a limit lowered live may leave more running, never more claimed).
func TestKeyLimitModelLiveChanges(t *testing.T) {
	c := setup(t, Config{})
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 3))
	t.Logf("seed %d", seed)
	keys := []string{"a", "b", "c", ""}
	// Each: the limits set, the effective concurrency of a, b, c (0: none), ktrack.
	type config struct {
		set  func() error
		conc map[string]int
		on   bool
	}
	configs := []config{
		{func() error { return c.SetLimit(ctx, "default", Limit{Concurrency: 5, KeyConcurrency: 2}) },
			map[string]int{"a": 2, "b": 2, "c": 2}, true},
		{func() error { return c.SetLimit(ctx, "default", Limit{Concurrency: 2, KeyConcurrency: 2}) },
			map[string]int{"a": 2, "b": 2, "c": 2}, false},
		{func() error { return c.RemoveLimit(ctx, "default") }, map[string]int{}, false},
		{func() error {
			if err := c.SetLimit(ctx, "default", Limit{Concurrency: 6, KeyConcurrency: 6}); err != nil {
				return err
			}
			return c.SetKeyLimit(ctx, "default", Limit{KeyConcurrency: 1}, "a")
		}, map[string]int{"a": 1, "b": 6, "c": 6}, true},
	}
	cur := configs[0]
	if err := cur.set(); err != nil {
		t.Fatal(err)
	}
	enqueue := func(n int) {
		k := keys[rng.IntN(len(keys))]
		opts := []Option{MaxRetry(1000)}
		if k != "" {
			opts = append(opts, LimitKey(k))
		}
		enqueueN(t, c, n, opts...)
	}
	unexpired := func() map[string]int {
		now := float64(c.rdb.Time(ctx).Val().UnixMilli())
		n := map[string]int{}
		for k, leases := range activeByKey(t, c) {
			for _, d := range leases {
				if d > now {
					n[k]++
				}
			}
		}
		return n
	}
	var held []*Job
	for range 4 {
		enqueue(5)
	}
	const steps = 1500
	for step := range steps {
		before := unexpired()
		what := ""
		if rng.IntN(25) == 0 {
			next := configs[rng.IntN(len(configs))]
			if err := c.RemoveLimit(ctx, "default"); err != nil {
				t.Fatal(err)
			}
			if err := next.set(); err != nil {
				t.Fatal(err)
			}
			cur, what = next, "limits changed"
		} else if what = modelStep(t, c, rng, &held, enqueue); what == "" {
			continue
		}
		truth := activeByKey(t, c)
		on, sets := keyLeases(t, c, keys[:3]...)
		if on != cur.on {
			t.Fatalf("step %d (%s): ktrack %v, want %v", step, what, on, cur.on)
		}
		for _, k := range keys[:3] {
			got := map[string]float64{}
			for _, z := range sets[k] {
				got[z.Member.(string)] = z.Score
			}
			want := truth[k]
			if !on {
				want = nil
			}
			if len(got) != len(want) {
				t.Fatalf("step %d (%s): key %s's leases %v, want %v (ktrack %v)", step, what, k, got, want, on)
			}
			for id, d := range want {
				if got[id] != d {
					t.Fatalf("step %d (%s): key %s's lease of %s = %v, active's %v", step, what, k, id, got[id], d)
				}
			}
		}
		after := unexpired()
		for _, k := range keys[:3] {
			if lim := cur.conc[k]; lim > 0 && after[k] > lim && after[k] > before[k] {
				t.Fatalf("step %d (%s): key %s went from %d to %d unexpired leases, limit %d", step, what, k,
					before[k], after[k], lim)
			}
		}
	}
}

// A due key gives a claim up to 4 jobs (the quantum, key_quantum in scripts/lib, while up
// to 256 keys wait) even when more keys are due than the claim has jobs: a claim of 20 over 31 keys serves 5 keys, 4
// jobs each, oldest first, and the claims after it serve the other keys in turn before any
// key comes round again. A key with one job gives it in its turn.
func TestKeyQuantum(t *testing.T) {
	c := setup(t, Config{})
	for k := range 30 {
		enqueueN(t, c, 10, LimitKey(fmt.Sprint("k", k)))
	}
	enqueueN(t, c, 1, LimitKey("one"))
	var order []string // the keys in the order they were served, once per claim
	for claim := range 7 {
		jobs, _ := claimLimited(t, c, "default", 20)
		if len(jobs) != 20 {
			t.Fatalf("claim %d = %d jobs, want 20", claim, len(jobs))
		}
		per, short := map[string]int{}, 0
		for _, j := range jobs {
			if per[j.LimitKey] == 0 {
				order = append(order, j.LimitKey)
			}
			per[j.LimitKey]++
		}
		for k, n := range per {
			if n > 4 {
				t.Errorf("claim %d took %d jobs of key %s, want at most 4", claim, n, k)
			}
			if n < 4 && k != "one" {
				short++
			}
		}
		if len(per) > 6 || short > 1 {
			t.Errorf("claim %d served %d keys, %d of them short of 4 jobs: %v; want 5 keys of 4 (and key one's job)", claim, len(per), short, per)
		}
	}
	seen := map[string]bool{}
	for i, k := range order[:31] {
		if seen[k] {
			t.Fatalf("key %s served again (turn %d) before every key had its turn: %v", k, i, order)
		}
		seen[k] = true
	}
	if order[0] != "k0" || !seen["one"] {
		t.Errorf("keys served: %v; want k0 first, every key (one included) within the first 31 turns", order)
	}
}

// Limits stored before the claims kept ktrack and kown (no kflags field) are read as they
// were then: every keyed job's lease kept in its key's set and every key's own limits
// read. A key concurrency stored so still binds, and the next change of the limits
// writes the flags, keeping the leases that were kept.
func TestKeyLimitsStoredBeforeTheFlags(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	enqueueN(t, c, 3, LimitKey("a"))
	enqueueN(t, c, 3, LimitKey("b"))
	// As the limits of an older version were: the default key concurrency 1 and b's own 2,
	// nothing else.
	c.rdb.HSet(ctx, qk.limit, "key", "1 0 0 0", "key:b", "2 0 0 0")
	jobs, _ := claimLimited(t, c, "default", 10)
	perKey := map[string]int{}
	for _, j := range jobs {
		perKey[j.LimitKey]++
	}
	if perKey["a"] != 1 || perKey["b"] != 2 {
		t.Fatalf("claim under stored limits without flags = %v; want a 1 (the default), b 2 (its own)", perKey)
	}
	if more, _ := claimLimited(t, c, "default", 10); len(more) != 0 {
		t.Fatalf("second claim = %d jobs; want none (a and b at their concurrency: their leases kept)", len(more))
	}
	// A change of the limits writes the flags and keeps the leases.
	if err := c.SetLimit(ctx, "default", Limit{Concurrency: 100}); err != nil {
		t.Fatal(err)
	}
	h := c.rdb.HGetAll(ctx, qk.limit).Val()
	if h["kflags"] != "1" || h["ktrack"] != "1" || h["kown"] != "1" {
		t.Errorf("limits after a change = %v; want kflags, ktrack and kown set", h)
	}
	if _, sets := keyLeases(t, c, "a", "b"); len(sets["a"]) != 1 || len(sets["b"]) != 2 {
		t.Errorf("key leases after the change = %v; want a's 1 and b's 2 kept", sets)
	}
	if more, _ := claimLimited(t, c, "default", 10); len(more) != 0 {
		t.Errorf("claim after the change = %d jobs; want none", len(more))
	}
	// Removing every limit removes the hash, flags included.
	if err := c.RemoveLimit(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if n := c.rdb.Exists(ctx, qk.limit).Val(); n != 0 {
		t.Errorf("limits hash after removing every limit: %v", c.rdb.HGetAll(ctx, qk.limit).Val())
	}
}

// An AckClaim whose acks read the limits first (a keyed job's) passes them to its claim
// as the flags made of them: limits stored before the flags still mean every key's own
// limits read and its leases kept. a (the default, 1) and b (its own, 2) each had a job
// acked; the claim after the acks takes one of a and one of b (b's other job still
// runs), each key back at its limit.
func TestKeyLimitsStoredBeforeTheFlagsAfterAcks(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	enqueueN(t, c, 3, LimitKey("a"))
	enqueueN(t, c, 3, LimitKey("b"))
	c.rdb.HSet(ctx, qk.limit, "key", "1 0 0 0", "key:b", "2 0 0 0")
	first, _ := claimLimited(t, c, "default", 10) // a's 1, b's 2
	var done []*Job                               // a's job and one of b's
	for _, j := range first {
		if j.LimitKey == "a" || j.LimitKey == "b" && !slices.ContainsFunc(done, func(d *Job) bool { return d.LimitKey == "b" }) {
			done = append(done, j)
		}
	}
	_, jobs, _, err := c.broker().AckClaimLimited(ctx, "default", done, make([][]byte, len(done)), 10, 30*time.Second, "w")
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string]int{}
	for _, j := range jobs {
		perKey[j.LimitKey]++
	}
	if len(first) != 3 || perKey["a"] != 1 || perKey["b"] != 1 {
		t.Fatalf("claim after acking %d of the first %d jobs = %v; want a 1, b 1 (each back at its limit)", len(done), len(first), perKey)
	}
}

// enqueueKeyed enqueues perKey jobs under each of keys limit keys k0, k1, ..., one batch.
func enqueueKeyed(t *testing.T, c *Client, keys, perKey int) {
	t.Helper()
	batch := make([]BatchJob, 0, keys*perKey)
	for k := range keys {
		for range perKey {
			batch = append(batch, BatchJob{Type: "t", Options: []Option{LimitKey(fmt.Sprint("k", k))}})
		}
	}
	if _, err := c.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
}

// The quantum grows with the keys waiting (key_quantum in scripts/lib): 4 up to 256 keys,
// then one more job a key per 64 keys, at most 16. A claim of 100 serves keys of q jobs
// each (the last one what is left), and every key has its turn before any key comes round
// again.
func TestKeyQuantumGrowsWithKeysWaiting(t *testing.T) {
	for _, tc := range []struct{ keys, q int }{{256, 4}, {300, 5}, {1000, 16}, {2000, 16}} {
		t.Run(fmt.Sprint(tc.keys), func(t *testing.T) {
			c := setup(t, Config{}) // parallel
			enqueueKeyed(t, c, tc.keys, tc.q+2)
			served := map[string]int{} // key -> the claim that served it
			for claim := 0; len(served) < tc.keys; claim++ {
				jobs, _ := claimLimited(t, c, "default", 100)
				if len(jobs) != 100 {
					t.Fatalf("claim %d = %d jobs, want 100", claim, len(jobs))
				}
				per := map[string]int{}
				for _, j := range jobs {
					per[j.LimitKey]++
				}
				short, fresh := 0, 0
				for k, n := range per {
					if n > tc.q {
						t.Fatalf("claim %d took %d jobs of key %s, want at most the quantum %d", claim, n, k, tc.q)
					}
					if n < tc.q {
						short++
					}
					if _, ok := served[k]; !ok {
						fresh++
					}
				}
				// A key comes round again only in the claim that gives the last keys their turn.
				for k := range per {
					if at, ok := served[k]; ok && len(served)+fresh < tc.keys {
						t.Fatalf("key %s served in claims %d and %d before every key had its turn (%d of %d)",
							k, at, claim, len(served)+fresh, tc.keys)
					}
					served[k] = claim
				}
				if want := (100 + tc.q - 1) / tc.q; claim == 0 && (len(per) != want || short > 1) {
					t.Errorf("first claim served %d keys, %d short of %d jobs: %v; want %d keys", len(per), short, tc.q, per, want)
				}
			}
		})
	}
}

// A claim looks at about n/q due keys first; when they run short (keys of one job each),
// it looks further, and still takes all it asked for, one job a key, oldest keys first.
func TestKeyClaimLooksFurtherWhenKeysRunShort(t *testing.T) {
	c := setup(t, Config{})
	enqueueKeyed(t, c, 1000, 1)
	qk := c.keys.queue("default")
	first := c.rdb.ZRange(ctx, qk.ring, 0, 99).Val()
	jobs, _ := claimLimited(t, c, "default", 100)
	got := map[string]bool{}
	for _, j := range jobs {
		got[j.LimitKey] = true
	}
	if len(jobs) != 100 || len(got) != 100 {
		t.Fatalf("claim of 100 over 1,000 keys of one job = %d jobs of %d keys; want 100 of 100", len(jobs), len(got))
	}
	for _, k := range first {
		if !got[k] {
			t.Fatalf("key %s, among the 100 first in the ring, not served: %v", k, got)
		}
	}
	if n := c.rdb.ZCard(ctx, qk.ring).Val(); n != 900 {
		t.Errorf("ring = %d keys after the claim, want 900 (the served keys ran dry)", n)
	}
}

// A claim takes all it asks for while a due key has jobs its limits let go: a key whose
// share was cut short by a later key with fewer jobs gives more once every key had its
// turn (before, A gave its half, B its one job, and the claim took 51 of 100).
func TestKeyClaimFilledByKeysWithMoreJobs(t *testing.T) {
	c := setup(t, Config{})
	enqueueN(t, c, 100, LimitKey("A"))
	b := enqueueN(t, c, 1, LimitKey("B"))[0]
	jobs, lim := claimLimited(t, c, "default", 100)
	per := map[string]int{}
	gotB := false
	for _, j := range jobs {
		per[j.LimitKey]++
		gotB = gotB || j.ID == b
	}
	if len(jobs) != 100 || !gotB || lim.By != "" {
		t.Fatalf("claim of 100 over A (100 jobs) and B (1) = %v, B's job %v, %+v; want A 99, B 1, no limit met", per, gotB, lim)
	}
	if n := c.rdb.LLen(ctx, c.keys.queue("default").base+"kready:A").Val(); n != 1 {
		t.Errorf("A's list holds %d jobs after the claim, want 1", n)
	}
}
