package queue

import (
	"slices"
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
