package queue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A claim that no key's limits can cut (no key limits, or none that could bind) serves
// the keys exactly as one under key limits that never bind: the same jobs, in the same
// order, the same keys left in the ring in the same order, and none left once their jobs
// are gone. The first takes a shorter path in the claim script (pop_plain in
// scripts/lib), the second builds a record per key (a key rate is followed per job), so
// the two are run side by side on the same work: 60 keys of 1 to 30 jobs (a key with
// exactly the quantum's jobs gives its last one without running short), jobs without a
// key, and claims of 2 to 120 jobs, some of them larger than every due key's share (the
// keys that gave all they were asked for give more).
func TestKeyClaimWithoutKeyLimitsAsUnderLimitsThatNeverBind(t *testing.T) {
	c := setup(t, Config{})
	// ruled: a key rate of 1,000,000/s, a token every microsecond: a claim takes at most
	// 1,000 jobs, and 20ms of tokens are claimed ahead.
	if err := c.SetLimit(ctx, "ruled", Limit{KeyRate: 1_000_000, KeyPeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 16))
	var keyOf []string // each job's limit key ("" for none), in enqueue order
	for k := range 60 {
		for range []int{1, 2, 3, 4, 4, 5, 8, 13, 30}[rng.IntN(9)] {
			keyOf = append(keyOf, fmt.Sprint("k", k))
		}
		if k%6 == 0 {
			keyOf = append(keyOf, "")
		}
	}
	// name: each job's key and its place among its key's jobs ("k7#2"), the same for both
	// queues' copies of a job.
	name := map[string]string{}
	for _, q := range []string{"plain", "ruled"} {
		batch := make([]BatchJob, len(keyOf))
		for i, k := range keyOf {
			batch[i] = BatchJob{Type: "t", Options: []Option{On(q)}}
			if k != "" {
				batch[i].Options = append(batch[i].Options, LimitKey(k))
			}
		}
		res, err := c.EnqueueBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for i, r := range res {
			seen[keyOf[i]]++
			name[r.ID] = fmt.Sprintf("%s#%d", keyOf[i], seen[keyOf[i]])
		}
	}
	claimed := 0
	for claim := 0; claimed < len(keyOf); claim++ {
		// Not 1: a claim of one while jobs without a key wait takes a key's job or one of
		// those by the parity of Redis's clock, which the two queues' claims need not share.
		n := []int{2, 3, 5, 16, 33, 120}[rng.IntN(6)]
		var got [2][]string
		var rings [2][]string
		for i, q := range []string{"plain", "ruled"} {
			jobs, _ := claimLimited(t, c, q, n)
			for _, j := range jobs {
				got[i] = append(got[i], name[j.ID])
			}
			rings[i] = c.rdb.ZRange(ctx, c.keys.queue(q).ring, 0, -1).Val()
		}
		if !slices.Equal(got[0], got[1]) {
			t.Fatalf("claim %d of %d:\nwithout key limits %v\nunder key limits   %v", claim, n, got[0], got[1])
		}
		if !slices.Equal(rings[0], rings[1]) {
			t.Fatalf("ring after claim %d of %d:\nwithout key limits %v\nunder key limits   %v", claim, n, rings[0], rings[1])
		}
		if len(got[0]) == 0 {
			t.Fatalf("claim %d of %d took nothing with %d of %d jobs claimed", claim, n, claimed, len(keyOf))
		}
		claimed += len(got[0])
	}
	for _, q := range []string{"plain", "ruled"} {
		if n := c.rdb.Exists(ctx, c.keys.queue(q).ring).Val(); n != 0 {
			t.Errorf("%s: ring left with %v after every job was claimed", q, c.rdb.ZRange(ctx, c.keys.queue(q).ring, 0, -1).Val())
		}
	}
}
