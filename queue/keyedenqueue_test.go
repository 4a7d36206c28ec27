package queue

import (
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A batch of keyed jobs is one group whatever their keys (each job gives its own): every
// job lands on its own key's list, each key joins the ring once at the call's time, a key
// already there keeps its place, and each hash has its own key.
func TestKeyedBatchPutsEachJobUnderItsKey(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	old, err := c.Enqueue(ctx, "a", nil, LimitKey("old"))
	if err != nil {
		t.Fatal(err)
	}
	place := c.rdb.ZScore(ctx, qk.ring, "old").Val()
	batch := []BatchJob{
		{Type: "a", Options: []Option{LimitKey("k1")}},
		{Type: "a", Options: []Option{LimitKey("k2")}},
		{Type: "a"},
		{Type: "a", Options: []Option{LimitKey("k1")}},
		{Type: "a", Options: []Option{LimitKey("old")}},
		{Type: "a", Options: []Option{LimitKey("k3"), Unique(time.Hour), UniqueKey("u")}},
	}
	res, err := c.EnqueueBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"k1": {res[3].ID, res[0].ID}, "k2": {res[1].ID}, "old": {res[4].ID, old}, "k3": {res[5].ID}}
	for k, ids := range want {
		if got := c.rdb.LRange(ctx, qk.kready(k), 0, -1).Val(); !slices.Equal(got, ids) {
			t.Errorf("kready:%s = %v, want %v", k, got, ids)
		}
	}
	if got := c.rdb.LRange(ctx, qk.ready, 0, -1).Val(); !slices.Equal(got, []string{res[2].ID}) {
		t.Errorf("ready = %v, want the unkeyed job %s", got, res[2].ID)
	}
	ring := c.rdb.ZRangeWithScores(ctx, qk.ring, 0, -1).Val()
	if len(ring) != 4 {
		t.Fatalf("ring = %v, want old, k1, k2, k3", ring)
	}
	for _, z := range ring {
		if z.Member == "old" && z.Score != place {
			t.Errorf("key old's place moved from %v to %v", place, z.Score)
		}
		if z.Member != "old" && z.Score < place {
			t.Errorf("key %v placed at %v, before old's %v", z.Member, z.Score, place)
		}
	}
	for i, k := range []string{"k1", "k2", "", "k1", "old", "k3"} {
		j, err := c.Get(ctx, "default", res[i].ID)
		if err != nil || j.LimitKey != k {
			t.Errorf("job %d: limit key %q, %v; want %q", i, j.LimitKey, err, k)
		}
	}
}

// A keyed batch that fails after its keys' lists and the ring were written (a later
// key of the wrong type) undoes them: the lists hold what they held, a key the call put
// in the ring is out again, and one that was there keeps its place.
func TestKeyedBatchFailingLaterWritesNothing(t *testing.T) {
	c := setup(t, Config{})
	for _, tc := range []struct {
		queue string
		key   func(queueKeys) string
		opts  []Option
	}{
		{"scheduled", func(qk queueKeys) string { return qk.scheduled }, []Option{Delay(time.Hour)}},
		{"events", func(qk queueKeys) string { return qk.events }, nil},
		{"ring", func(qk queueKeys) string { return qk.ring }, nil},
	} {
		qk := c.keys.queue(tc.queue)
		old, err := c.Enqueue(ctx, "a", nil, On(tc.queue), LimitKey("old"))
		if err != nil {
			t.Fatal(err)
		}
		place := c.rdb.ZScore(ctx, qk.ring, "old").Val()
		ring := []redis.Z{{Score: place, Member: "old"}}
		if tc.queue == "ring" {
			c.rdb.Del(ctx, qk.ring)
			ring = nil
		}
		c.rdb.Set(ctx, tc.key(qk), "not a list or set", 0)
		batch := []BatchJob{
			{Type: "a"},
			{Type: "a", Options: []Option{LimitKey("old")}},
			{Type: "a", Options: []Option{LimitKey("new")}},
			{Type: "a", Options: tc.opts},
		}
		for i := range batch {
			batch[i].Options = append(batch[i].Options, On(tc.queue))
		}
		res, err := c.EnqueueBatch(ctx, batch)
		if err == nil && res[0].Err == nil {
			t.Errorf("%s: EnqueueBatch() = %+v, want a WRONGTYPE error", tc.queue, res)
		}
		for _, r := range res {
			if r.ID == "" || c.rdb.Exists(ctx, qk.job(r.ID)).Val() != 0 {
				t.Errorf("%s: job %q: no ID, or written by a failed enqueue", tc.queue, r.ID)
			}
		}
		if got := c.rdb.LRange(ctx, qk.kready("old"), 0, -1).Val(); !slices.Equal(got, []string{old}) {
			t.Errorf("%s: kready:old = %v, want [%s]", tc.queue, got, old)
		}
		if n := c.rdb.Exists(ctx, qk.kready("new"), qk.ready).Val(); n != 0 {
			t.Errorf("%s: %d of kready:new and ready exist, want none", tc.queue, n)
		}
		if tc.queue != "ring" {
			if got := c.rdb.ZRangeWithScores(ctx, qk.ring, 0, -1).Val(); !slices.Equal(got, ring) {
				t.Errorf("%s: ring = %v, want %v", tc.queue, got, ring)
			}
		}
	}
}

// Keyed jobs in one group beside every other kind of job of a batch: plain, delayed and
// waiting ones (their keys wait in their hashes only, until they are ready), unique ones
// and duplicates (a unique key held, an ID met twice in the call or already taken): each
// hash holds its own key, each ready keyed job is on its key's list, the ring holds the
// keys of those, and a key already there keeps its place.
func TestKeyedBatchMixedWithEveryOtherKindOfJob(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	// A pre-existing job with a caller-chosen ID, keyed: a batch job with the same ID is a duplicate.
	if _, err := c.Enqueue(ctx, "a", nil, ID("pre"), LimitKey("kp")); err != nil {
		t.Fatal(err)
	}
	prePlace := c.rdb.ZScore(ctx, qk.ring, "kp").Val()
	dep, err := c.Enqueue(ctx, "a", nil, Delay(time.Hour)) // a dependency that stays
	if err != nil {
		t.Fatal(err)
	}
	batch := []BatchJob{
		{Type: "a"}, // 0 unkeyed
		{Type: "a", Options: []Option{LimitKey("k1")}},                                                        // 1
		{Type: "a", Options: []Option{LimitKey("kd"), Delay(time.Hour)}},                                      // 2 delayed keyed
		{Type: "a", Options: []Option{LimitKey("k3"), At(time.Now().Add(-time.Minute))}},                      // 3 past At
		{Type: "a", Options: []Option{LimitKey("k1"), Unique(time.Hour), UniqueKey("u1")}},                    // 4 unique keyed
		{Type: "a", Options: []Option{LimitKey("k4"), Unique(time.Hour), UniqueKey("u1")}},                    // 5 same unique key: dup
		{Type: "a", Options: []Option{LimitKey("k5"), ID("cid")}},                                             // 6 caller ID
		{Type: "a", Options: []Option{LimitKey("k6"), ID("cid")}},                                             // 7 dup within call
		{Type: "a", Options: []Option{LimitKey("k7"), ID("pre")}},                                             // 8 dup of existing
		{Type: "a", Options: []Option{Unique(time.Hour), UniqueKey("u2")}},                                    // 9 unique unkeyed
		{Type: "a", Options: []Option{LimitKey("kw"), After(dep)}},                                            // 10 waiting keyed
		{Type: "a", Options: []Option{LimitKey("kdu"), Delay(time.Hour), Unique(time.Hour), UniqueKey("u3")}}, // 11
		{Type: "a", Options: []Option{LimitKey("kp"), Meta("m", "v")}},                                        // 12 existing key
		{Type: "a", Options: []Option{LimitKey("k1"), ID("cid2"), Unique(time.Hour), UniqueKey("u4")}},        // 13
		{Type: "a", Options: []Option{LimitKey("k1")}},                                                        // 14
	}
	// The call's error sums up the duplicates; each job's result says which it was.
	res, _ := c.EnqueueBatch(ctx, batch)
	dups := map[int]bool{5: true, 7: true, 8: true}
	for i, r := range res {
		if dups[i] != errors.Is(r.Err, ErrDuplicate) {
			t.Errorf("job %d: err %v, dup want %v", i, r.Err, dups[i])
		}
		if !dups[i] && r.Err != nil {
			t.Errorf("job %d: %v", i, r.Err)
		}
	}
	wantKey := map[int]string{0: "", 1: "k1", 2: "kd", 3: "k3", 4: "k1", 6: "k5", 9: "", 10: "kw", 11: "kdu", 12: "kp", 13: "k1", 14: "k1"}
	wantState := map[int]State{0: StateReady, 1: StateReady, 2: StateScheduled, 3: StateReady, 4: StateReady, 6: StateReady,
		9: StateReady, 10: StateWaiting, 11: StateScheduled, 12: StateReady, 13: StateReady, 14: StateReady}
	for i, k := range wantKey {
		j, err := c.Get(ctx, "default", res[i].ID)
		if err != nil {
			t.Errorf("job %d: %v", i, err)
			continue
		}
		if j.LimitKey != k || j.State != wantState[i] {
			t.Errorf("job %d: key %q state %s, want %q %s", i, j.LimitKey, j.State, k, wantState[i])
		}
		raw := c.rdb.HGet(ctx, qk.job(res[i].ID), "limit_key").Val()
		if raw != k {
			t.Errorf("job %d: raw limit_key %q want %q", i, raw, k)
		}
	}
	if j, _ := c.Get(ctx, "default", "pre"); j.LimitKey != "kp" {
		t.Errorf("pre overwritten: %+v", j)
	}
	lists := map[string][]string{
		"k1": {res[14].ID, res[13].ID, res[4].ID, res[1].ID},
		"k3": {res[3].ID},
		"k5": {"cid"},
		"kp": {res[12].ID, "pre"},
		"k4": nil, "k6": nil, "k7": nil, "kd": nil, "kw": nil, "kdu": nil,
	}
	for k, ids := range lists {
		got := c.rdb.LRange(ctx, qk.kready(k), 0, -1).Val()
		if !slices.Equal(got, ids) && !(len(got) == 0 && len(ids) == 0) {
			t.Errorf("kready:%s = %v want %v", k, got, ids)
		}
	}
	if got := c.rdb.LRange(ctx, qk.ready, 0, -1).Val(); !slices.Equal(got, []string{res[9].ID, res[0].ID}) {
		t.Errorf("ready = %v", got)
	}
	ring := c.rdb.ZRange(ctx, qk.ring, 0, -1).Val()
	sort.Strings(ring)
	if !slices.Equal(ring, []string{"k1", "k3", "k5", "kp"}) {
		t.Errorf("ring = %v", ring)
	}
	if s := c.rdb.ZScore(ctx, qk.ring, "kp").Val(); s != prePlace {
		t.Errorf("kp moved %v -> %v", prePlace, s)
	}
	sched := c.rdb.ZRange(ctx, qk.scheduled, 0, -1).Val()
	sort.Strings(sched)
	want := []string{dep, res[2].ID, res[11].ID}
	sort.Strings(want)
	if !slices.Equal(sched, want) {
		t.Errorf("scheduled = %v want %v", sched, want)
	}
	if c.rdb.ZScore(ctx, qk.base+"waiting", res[10].ID).Err() != nil {
		t.Errorf("waiting lacks job 10")
	}
}
