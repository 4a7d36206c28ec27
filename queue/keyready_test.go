package queue

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// keyedQueue enqueues, on default, 3 jobs without a key, then 5 of key A, 2 of B and 1 of
// C (keys enter the ring in that order; in the same millisecond they tie and go by
// name, the same order), and returns every ID in the order the ready
// listing promises: the plain jobs in claim order (oldest first), then each key's oldest
// first, keys in ring order.
func keyedQueue(t *testing.T, c *Client) []string {
	t.Helper()
	want := enqueueN(t, c, 3)
	for _, k := range []struct {
		key string
		n   int
	}{{"A", 5}, {"B", 2}, {"C", 1}} {
		want = append(want, enqueueN(t, c, k.n, LimitKey(k.key))...)
	}
	return want
}

// readyWalk walks the ready pages of queue q, limit jobs each, and returns the IDs in order
// and the cursors; it fails on a page that is empty though another follows twice in a row
// (a walk that gets stuck).
func readyWalk(t *testing.T, c *Client, q string, limit int) (ids, cursors []string) {
	t.Helper()
	cursor := ""
	for range 10_000 {
		p, err := c.Page(ctx, q, StateReady, cursor, limit)
		if err != nil {
			t.Fatalf("Page(ready, %q, %d) err = %v", cursor, limit, err)
		}
		if len(p.Jobs) > limit {
			t.Fatalf("Page(ready, %q, %d) = %d jobs, more than asked", cursor, limit, len(p.Jobs))
		}
		ids = append(ids, jobIDs(p.Jobs)...)
		if p.Next == "" {
			return ids, cursors
		}
		if p.Next == cursor {
			t.Fatalf("Page(ready, %q) gave its own cursor as next: stuck", cursor)
		}
		cursor = p.Next
		cursors = append(cursors, cursor)
	}
	t.Fatalf("Page(ready) walk did not end")
	return nil, nil
}

// Jobs waiting under a limit key are ready jobs for every reader: Stats and Depths count
// them, List and Page list them after the jobs without a key, keys in ring order, and
// the latency covers them.
func TestKeyedReadyJobsVisibleToEveryReader(t *testing.T) {
	c := setup(t, Config{})
	want := keyedQueue(t, c)
	st, err := c.StatsOf(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Ready != 11 || st[0].KeysWaiting != 3 {
		t.Errorf("Stats: ready %d, keys waiting %d; want 11 (3 plain, 8 keyed), 3", st[0].Ready, st[0].KeysWaiting)
	}
	d, err := c.Depths(ctx, []string{"default"})
	if err != nil || d["default"][StateReady] != 11 {
		t.Errorf("Depths() ready = %d, %v; want 11", d["default"][StateReady], err)
	}
	all, err := c.List(ctx, "default", StateReady, 0, 100)
	if err != nil || !slices.Equal(jobIDs(all), want) {
		t.Fatalf("List(ready, 0, 100) = %v, %v;\nwant %v", jobIDs(all), err, want)
	}
	for _, j := range all[3:] {
		if j.LimitKey == "" || j.State != StateReady {
			t.Errorf("keyed job %s listed with key %q, state %s", j.ID, j.LimitKey, j.State)
		}
	}
	for _, w := range []struct{ off, lim int }{{0, 3}, {2, 3}, {3, 2}, {5, 4}, {8, 1}, {10, 5}, {11, 5}, {50, 5}} {
		got, err := c.List(ctx, "default", StateReady, w.off, w.lim)
		exp := want[min(w.off, len(want)):min(w.off+w.lim, len(want))]
		if err != nil || !slices.Equal(jobIDs(got), exp) {
			t.Errorf("List(ready, %d, %d) = %v, %v; want %v", w.off, w.lim, jobIDs(got), err, exp)
		}
	}
	for _, limit := range []int{1, 2, 3, 4, 5, 11, 12, MaxPage} {
		ids, cursors := readyWalk(t, c, "default", limit)
		if !slices.Equal(ids, want) {
			t.Errorf("Page walk of %d = %v;\nwant %v", limit, ids, want)
		}
		// A page that fills up at the plain list's end points at the first key.
		if limit == 3 && (len(cursors) == 0 || !strings.HasPrefix(cursors[0], "k:0:")) {
			t.Errorf("Page walk of 3: cursors %q, want the first at the first key", cursors)
		}
	}
	// Only keyed jobs ready: the latency is theirs.
	if n, err := c.Purge(ctx, "default", StateReady); err != nil || n != 11 {
		t.Fatalf("Purge(ready) = %d, %v; want 11", n, err)
	}
	enqueueN(t, c, 1, LimitKey("late"))
	time.Sleep(30 * time.Millisecond)
	st, _ = c.StatsOf(ctx, "default")
	if st[0].Ready != 1 || st[0].Latency < 20*time.Millisecond {
		t.Errorf("Stats with one keyed job ready for 30ms = ready %d, latency %v; want 1, at least 20ms", st[0].Ready, st[0].Latency)
	}
}

// A cursor into the keys stays valid as the claims serve keys (a served key moves to the
// ring's end): the walk goes on without error, never stuck, and lists every job that
// stayed ready throughout at least once.
func TestReadyCursorSurvivesClaims(t *testing.T) {
	c := setup(t, Config{})
	keyedQueue(t, c)
	first, err := c.Page(ctx, "default", StateReady, "", 5) // 3 plain, A's first 2
	if err != nil || len(first.Jobs) != 5 || !strings.HasPrefix(first.Next, "k:2:") {
		t.Fatalf("first page = %d jobs, next %q, %v; want 5, next at A's third", len(first.Jobs), first.Next, err)
	}
	// Claims take the plain jobs and A's first, moving A to the ring's end.
	claimed, _ := claimLimited(t, c, "default", 2)
	claimed2, _ := claimLimited(t, c, "default", 2)
	gone := map[string]bool{}
	for _, j := range append(claimed, claimed2...) {
		gone[j.ID] = true
	}
	seen := map[string]bool{}
	for _, j := range first.Jobs {
		seen[j.ID] = true
	}
	cursor := first.Next
	for i := 0; cursor != ""; i++ {
		if i > 100 {
			t.Fatal("walk after claims did not end")
		}
		p, err := c.Page(ctx, "default", StateReady, cursor, 2)
		if err != nil {
			t.Fatalf("Page(%q) after claims: %v", cursor, err)
		}
		for _, j := range p.Jobs {
			seen[j.ID] = true
		}
		cursor = p.Next
	}
	still, err := c.List(ctx, "default", StateReady, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range still {
		if !seen[j.ID] {
			t.Errorf("job %s (key %q) stayed ready but the walk missed it", j.ID, j.LimitKey)
		}
	}
}

// A bad ready cursor is refused with ErrInvalid, naming the cursor.
func TestReadyCursorRefused(t *testing.T) {
	c := setup(t, Config{})
	keyedQueue(t, c)
	for _, cur := range []string{"k:", "k:x:1:A", "k:1:1:", "k:-1:1:A", "k:1:NaN:A", "k:1", "x", "-1"} {
		_, err := c.Page(ctx, "default", StateReady, cur, 10)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("%q", cur)) {
			t.Errorf("Page(ready, %q) err = %v; want ErrInvalid naming the cursor", cur, err)
		}
	}
	// A key name with colons and spaces round-trips through the cursor.
	enqueueN(t, c, 3, LimitKey("tenant:1:2"))
	ids, _ := readyWalk(t, c, "default", 1)
	if len(ids) != 14 {
		t.Errorf("walk of 1 with a key holding colons = %d jobs, want 14", len(ids))
	}
}

// More keys than one round trip reads (ringPage): Stats counts every keyed job exactly,
// a page walk lists each once, List skips into the middle of the keys.
func TestKeyedReadyManyKeys(t *testing.T) {
	c := setup(t, Config{})
	const n = 2*ringPage + 500
	batch := make([]BatchJob, n)
	for i := range batch {
		batch[i] = BatchJob{Type: "t", Options: []Option{LimitKey(fmt.Sprintf("k%05d", i))}}
	}
	for from := 0; from < n; from += 1000 {
		if _, err := c.EnqueueBatch(ctx, batch[from:min(from+1000, n)]); err != nil {
			t.Fatal(err)
		}
	}
	enqueueN(t, c, 10, LimitKey("k00007")) // one key with more than one job
	st, err := c.StatsOf(ctx, "default")
	if err != nil || st[0].Ready != n+10 || st[0].KeysWaiting != n {
		t.Fatalf("Stats = ready %d, keys %d, %v; want %d, %d", st[0].Ready, st[0].KeysWaiting, err, n+10, n)
	}
	ids, _ := readyWalk(t, c, "default", MaxPage)
	distinct := map[string]bool{}
	for _, id := range ids {
		distinct[id] = true
	}
	if len(ids) != n+10 || len(distinct) != n+10 {
		t.Errorf("page walk = %d IDs (%d distinct), want %d", len(ids), len(distinct), n+10)
	}
	got, err := c.List(ctx, "default", StateReady, n, 20)
	if err != nil || !slices.Equal(jobIDs(got), ids[n:]) {
		t.Errorf("List(ready, %d, 20) = %d jobs, %v; want the walk's last 10", n, len(got), err)
	}
}

// Purge of ready takes the keyed jobs too, over several calls for a key of more than
// 1000, and a key whose list it empties leaves the ring: no dangling member, and a new
// job of that key enters the ring again and is claimed.
func TestPurgeReadyTakesKeyedJobs(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	keyedQueue(t, c)
	enqueueN(t, c, 1500, LimitKey("big"))
	n, err := c.Purge(ctx, "default", StateReady)
	if err != nil || n != 1511 {
		t.Fatalf("Purge(ready) = %d, %v; want 1511", n, err)
	}
	if z := c.rdb.ZCard(ctx, qk.ring).Val(); z != 0 {
		t.Errorf("ring after purge holds %d keys, want none", z)
	}
	for _, k := range []string{"A", "B", "C", "big"} {
		if c.rdb.Exists(ctx, qk.kready(k)).Val() != 0 {
			t.Errorf("kready:%s still exists after purge", k)
		}
	}
	st, _ := c.StatsOf(ctx, "default")
	if st[0].Ready != 0 || st[0].KeysWaiting != 0 {
		t.Errorf("Stats after purge = ready %d, keys %d; want 0, 0", st[0].Ready, st[0].KeysWaiting)
	}
	id := enqueueN(t, c, 1, LimitKey("A"))[0]
	got, _ := claimLimited(t, c, "default", 10)
	if len(got) != 1 || got[0].ID != id {
		t.Errorf("claim after purge = %v, want the new job of A", jobIDs(got))
	}
}

// A purge call that leaves jobs in a key's list keeps the key in the ring at its place,
// so workers go on claiming them; the call that empties it takes it out.
func TestPurgePartialKeyStaysServed(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	ids := enqueueN(t, c, 5, LimitKey("A"))
	score := c.rdb.ZScore(ctx, qk.ring, "A").Val()
	n, err := c.purgeCall(ctx, qk, StateReady, 0, "+inf", "A", 2, "nokey", 1)
	if err != nil || n != 2 {
		t.Fatalf("purge of 2 of A's 5 = %d, %v", n, err)
	}
	if s, err := c.rdb.ZScore(ctx, qk.ring, "A").Result(); err != nil || s != score {
		t.Errorf("A in the ring after a partial purge = %v, %v; want its place %v kept", s, err, score)
	}
	if c.rdb.ZScore(ctx, qk.ring, "nokey").Err() == nil {
		t.Errorf("a key with no list entered the ring")
	}
	for _, id := range ids[:2] {
		if c.rdb.Exists(ctx, qk.job(id)).Val() != 0 {
			t.Errorf("purged job %s (A's oldest) still has its hash", id)
		}
	}
	got, _ := claimLimited(t, c, "default", 10)
	if !slices.Equal(jobIDs(got), ids[2:]) {
		t.Errorf("claim after a partial purge = %v, want A's 3 left %v", jobIDs(got), ids[2:])
	}
	if z := c.rdb.ZCard(ctx, qk.ring).Val(); z != 0 {
		t.Errorf("ring after A's last job was claimed holds %d keys", z)
	}
	// A purge whose key list is emptied by it leaves no dangling ring member.
	enqueueN(t, c, 2, LimitKey("B"))
	if n, err := c.purgeCall(ctx, qk, StateReady, 0, "+inf", "B", 5); err != nil || n != 2 {
		t.Fatalf("purge of B = %d, %v", n, err)
	}
	if z := c.rdb.ZCard(ctx, qk.ring).Val(); z != 0 {
		t.Errorf("ring after B was purged holds %d keys", z)
	}
}

// A worker's claims go on with the remaining keyed jobs while a purge runs: jobs enqueued
// under a key after the purge read it stay, with the key in the ring.
func TestPurgeReadyWhileKeyedJobsArrive(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	enqueueN(t, c, 3, LimitKey("A"))
	enqueueN(t, c, 3, LimitKey("B"))
	// Purge A alone, as if the purge had read B's length before 2 more of A came.
	lateA := enqueueN(t, c, 2, LimitKey("A"))
	if n, err := c.purgeCall(ctx, qk, StateReady, 0, "+inf", "B", 3, "A", 3); err != nil || n != 6 {
		t.Fatalf("purge = %d, %v; want 6", n, err)
	}
	got, _ := claimLimited(t, c, "default", 10)
	if !slices.Equal(jobIDs(got), lateA) {
		t.Errorf("claim after the purge = %v, want the 2 jobs of A that came after %v", jobIDs(got), lateA)
	}
	if z := c.rdb.ZCard(ctx, qk.ring).Val(); z != 0 {
		t.Errorf("ring at the end holds %d keys", z)
	}
}

// BenchmarkReadyManyKeys reads a queue whose ready jobs wait under 100,000 limit keys (one
// job each): the stats' exact count (ZSCAN and LLEN, 1,000 keys a round trip), the first
// page of 50 and a page from a cursor in the middle of the keys (a bounded read whatever
// the ring's size).
func BenchmarkReadyManyKeys(b *testing.B) {
	c := benchClient(b)
	const n = 100_000
	batch := make([]BatchJob, 1000)
	for from := 0; from < n; from += len(batch) {
		for i := range batch {
			batch[i] = BatchJob{Type: "t", Options: []Option{LimitKey(fmt.Sprintf("k%06d", from+i))}}
		}
		if _, err := c.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	at, _, err := c.ringSkip(ctx, c.keys.queue("default"), n/2)
	if err != nil || at == nil {
		b.Fatalf("ringSkip(%d) = %v, %v", n/2, at, err)
	}
	b.Run("stats", func(b *testing.B) {
		for b.Loop() {
			st, err := c.StatsOf(ctx, "default")
			if err != nil || st[0].Ready != n {
				b.Fatalf("StatsOf() = %+v, %v", st, err)
			}
		}
	})
	for _, v := range []struct{ name, cursor string }{{"page-first-50", ""}, {"page-middle-50", at.String()}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				p, err := c.Page(ctx, "default", StateReady, v.cursor, 50)
				if err != nil || len(p.Jobs) != 50 {
					b.Fatalf("Page() = %v", err)
				}
			}
		})
	}
}
