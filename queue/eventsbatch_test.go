package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// enqueueN enqueues n jobs of type t in one call (one stream entry) and returns their IDs.
func enqueueN(t *testing.T, c *Client, n int, opts ...Option) []string {
	t.Helper()
	batch := make([]BatchJob, n)
	for i := range batch {
		batch[i] = BatchJob{Type: "t", Options: opts}
	}
	res, err := c.EnqueueBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// A call that moves many jobs writes one stream entry holding all its events, in the
// call's order; readers get one event each, every one but the entry's last with a cursor
// "ID/k" (after the entry's first k events), the last with the entry's ID.
func TestEventsOneEntryPerCall(t *testing.T) {
	c := setup(t, Config{})
	b := c.broker()
	stream := c.keys.queue("default").events
	ids := enqueueN(t, c, 4)
	jobs, err := b.Claim(ctx, "default", 3, time.Minute, "w1")
	if err != nil || len(jobs) != 3 {
		t.Fatalf("Claim(3) = %v, %v", jobs, err)
	}
	// One ackclaim call: 3 acks (one of them cancelled first: dead), 1 claim.
	if _, err := c.Cancel(ctx, "default", jobs[1].ID); err != nil {
		t.Fatal(err)
	}
	acked, more, err := b.ackFinished(ctx, "default",
		[]Finished{{Job: jobs[0]}, {Job: jobs[1]}, {Job: jobs[2]}}, 5, time.Minute, "w2")
	if err != nil || len(acked) != 3 || len(more) != 1 {
		t.Fatalf("AckClaim(ack 3, claim 5) = %v, %d jobs, %v", acked, len(more), err)
	}
	// 4 entries: the enqueue, the claim, the cancel (one job), the ackclaim.
	if n := c.rdb.XLen(ctx, stream).Val(); n != 4 {
		t.Errorf("stream holds %d entries, want 4 (one per call)", n)
	}
	want := []string{
		"enqueued " + ids[0] + " 0 ", "enqueued " + ids[1] + " 0 ", "enqueued " + ids[2] + " 0 ", "enqueued " + ids[3] + " 0 ",
		"started " + ids[0] + " 1 w1", "started " + ids[1] + " 1 w1", "started " + ids[2] + " 1 w1",
		"cancelled " + ids[1] + " 1 ",
		"done " + ids[0] + " 1 w1", "dead " + ids[1] + " 1 w1", "done " + ids[2] + " 1 w1", "started " + ids[3] + " 1 w2",
	}
	got := readEvents(t, c, []string{"default"}, "0", len(want))
	var sums, cursors []string
	for _, e := range got {
		sums = append(sums, summary(e))
		cursors = append(cursors, e.Cursor)
	}
	if !slices.Equal(sums, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(sums, "\n"), strings.Join(want, "\n"))
	}
	entries, err := c.rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil || len(entries) != 4 {
		t.Fatalf("XRANGE = %d entries, %v", len(entries), err)
	}
	e0, e1, e2, e3 := entries[0].ID, entries[1].ID, entries[2].ID, entries[3].ID
	wantCursors := []string{e0 + "/1", e0 + "/2", e0 + "/3", e0, e1 + "/1", e1 + "/2", e1, e2,
		e3 + "/1", e3 + "/2", e3 + "/3", e3}
	if !slices.Equal(cursors, wantCursors) {
		t.Errorf("cursors %v, want %v", cursors, wantCursors)
	}
	if v := entries[3].Values["event"].(string); strings.Count(v, "\n") != 3 {
		t.Errorf("ackclaim entry = %q, want 4 lines", v)
	}
}

// A call of more than 16 events writes them in entries of 16 (so a stream capped at N
// entries keeps at most 16N events), in order, with one XTRIM: 40 enqueued jobs and 40
// claimed ones are 3 entries each (16, 16, 8), and a reader resumed inside any of them
// gets exactly the rest.
func TestEventsEntriesHoldAtMost16(t *testing.T) {
	c := setup(t, Config{})
	stream := c.keys.queue("default").events
	ids := enqueueN(t, c, 40)
	jobs, err := c.broker().Claim(ctx, "default", 40, time.Minute, "w")
	if err != nil || len(jobs) != 40 {
		t.Fatalf("Claim(40) = %d, %v", len(jobs), err)
	}
	entries, err := c.rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, e := range entries {
		sizes = append(sizes, strings.Count(e.Values["event"].(string), "\n")+1)
	}
	if want := []int{16, 16, 8, 16, 16, 8}; !slices.Equal(sizes, want) {
		t.Fatalf("entries hold %v events, want %v", sizes, want)
	}
	var want []string
	for _, id := range ids {
		want = append(want, "enqueued "+id+" 0 ")
	}
	for _, id := range ids {
		want = append(want, "started "+id+" 1 w")
	}
	all := readEvents(t, c, nil, "0", 80)
	for _, k := range []int{0, 15, 16, 17, 39, 40, 47, 78} {
		rest := readEvents(t, c, nil, all[k].Cursor, 79-k)
		var got []string
		for _, e := range append(all[:k+1:k+1], rest...) {
			got = append(got, summary(e))
		}
		if !slices.Equal(got, want) {
			t.Errorf("resumed after event %d (cursor %s): %d events, want the 80 in order", k, all[k].Cursor, len(got))
		}
	}
}

// A reader stopped after any event of a multi-event entry and resumed from that event's
// cursor gets exactly the rest: nothing lost, nothing repeated, then what follows.
func TestEventsResumeInsideAnEntry(t *testing.T) {
	c := setup(t, Config{})
	ids := enqueueN(t, c, 6)
	ids = append(ids, enqueueN(t, c, 3)...)
	all := readEvents(t, c, nil, "0", len(ids))
	for k := range len(all) - 1 {
		// Stop after event k (a reader killed there), resume from its cursor.
		taken := readEvents(t, c, nil, "0", k+1)
		rest := readEvents(t, c, nil, taken[k].Cursor, len(ids)-k-1)
		var got []string
		for _, e := range append(taken, rest...) {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, ids) {
			t.Errorf("stopped after event %d (cursor %s), resumed: %v, want %v", k, taken[k].Cursor, got, ids)
		}
		for i, e := range rest {
			if e.Cursor != all[k+1+i].Cursor {
				t.Errorf("resumed from %s: event %d cursor %s, want %s", taken[k].Cursor, i, e.Cursor, all[k+1+i].Cursor)
			}
		}
	}
	// Resumed inside the last entry and caught up, a reader waits for new entries.
	last := all[len(all)-2].Cursor
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var got []string
	for e, err := range c.Events(ctx, nil, last) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.ID)
		if len(got) == 1 {
			ids = append(ids, enqueueN(t, c, 2)...)
		}
		if len(got) == 3 {
			break
		}
	}
	if !slices.Equal(got, ids[len(ids)-3:]) {
		t.Errorf("followed from %s: %v, want %v", last, got, ids[len(ids)-3:])
	}
}

// Several queues: a cursor holds each queue's position, inside an entry or not.
func TestEventsSeveralQueuesInsideAnEntry(t *testing.T) {
	c := setup(t, Config{})
	a := enqueueN(t, c, 3, On("a"))
	b := enqueueN(t, c, 2, On("b"))
	all := readEvents(t, c, []string{"a", "b"}, "0", 5)
	for k := range len(all) - 1 {
		rest := readEvents(t, c, []string{"a", "b"}, all[k].Cursor, 4-k)
		var got []string
		for _, e := range append(slices.Clone(all[:k+1]), rest...) {
			got = append(got, e.Queue+":"+e.ID)
		}
		var want []string
		for _, id := range a {
			want = append(want, "a:"+id)
		}
		for _, id := range b {
			want = append(want, "b:"+id)
		}
		// Order is promised per queue; on a cluster each queue is read on its own node, so
		// the queues interleave as their replies arrive.
		slices.SortStableFunc(got, func(x, y string) int { return strings.Compare(x[:2], y[:2]) })
		if !slices.Equal(got, want) {
			t.Errorf("resumed from %s: %v, want %v", all[k].Cursor, got, want)
		}
	}
	// The first event read is of either queue on a cluster (each is read on its node): its
	// queue's position is inside its entry (/1), the other's before its first.
	if c0, q := all[0].Cursor, all[0].Queue; !strings.Contains(c0, q+"=") || strings.Count(c0, "/1") != 1 ||
		!strings.HasPrefix(c0, "a=") || !strings.Contains(c0, ",b=") {
		t.Errorf("cursor %q after an event of %s, want a=ID,b=ID with %s's inside its entry (/1)", c0, q, q)
	}
}

// A reader inside an entry that Redis has trimmed since lost the rest of it: a GapError,
// even when the next entry is the stream's first.
func TestEventsGapInsideAnEntry(t *testing.T) {
	c := setup(t, Config{Events: 10})
	enqueueN(t, c, 3)
	first := readEvents(t, c, nil, "0", 1)
	for range 300 {
		if _, err := c.Enqueue(ctx, "t", nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, err := range c.Events(ctx, nil, first[0].Cursor) {
		var gap *GapError
		if !errors.As(err, &gap) || gap.Cursor != first[0].Cursor {
			t.Fatalf("Events(%s, trimmed) first yield err = %v, want a *GapError at that cursor", first[0].Cursor, err)
		}
		break
	}
}

// Cursors are checked before anything is read: an entry position with /k takes k >= 1.
func TestValidateCursor(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"", true}, {"$", true}, {"0", true}, {"1733380000123", true}, {"1733380000123-0", true},
		{"1733380000123-0/3", true}, {"a=1-0/2,b=1-1", true}, {"a=1,b=2-0", true},
		{"1733380000123-0/0", false}, {"1733380000123-0/", false}, {"1733380000123-0/x", false},
		{"1733380000123-0/-1", false}, {"1733380000123-0/03", false}, {"1733380000123/3", false},
		{"1-0/1/2", false}, {"a=1-0/0", false}, {"a=1/2", false}, {"x", false},
	} {
		err := ValidateCursor(tc.in)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("ValidateCursor(%q) = %v, want ok %v (else ErrInvalid)", tc.in, err, tc.ok)
		}
	}
}

// Wait finds its job's done event inside a batch entry (a worker's ack of several jobs):
// with DoneRetention < 0 the acked job is deleted at once, so only the event can tell.
func TestWaitSeesDoneInsideABatchEntry(t *testing.T) {
	c := setup(t, Config{DoneRetention: -1})
	b := c.broker()
	ids := enqueueN(t, c, 5)
	jobs, err := b.Claim(ctx, "default", 5, time.Minute, "w")
	if err != nil || len(jobs) != 5 {
		t.Fatalf("Claim(5) = %d, %v", len(jobs), err)
	}
	// The waiter on a connection of its own, named, to see when it blocks on the stream:
	// CLIENT LIST of one node shows it, which a cluster client cannot aim at the queue's
	// node. What is read is the same on a cluster (TestTailAcrossClusterMasters).
	single, ok := c.rdb.(*redis.Client)
	if !ok {
		t.Skip("names the waiter's connection on a single node")
	}
	opts := *single.Options()
	opts.ClientName = "wait-" + strings.ReplaceAll(c.cfg.Prefix, ":", "-")
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { rdb.Close() })
	waiter, err := NewClient(rdb, c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		j, err := waiter.Wait(ctx, "default", ids[2])
		if err == nil && (j.State != StateDone || j.Worker != "w" || j.Attempt != 1) {
			err = fmt.Errorf("job %+v, want done by w in attempt 1", j)
		}
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(c.rdb.ClientList(ctx).Val(), "name="+opts.ClientName+" ") ||
		!blockedOnXRead(c, opts.ClientName) {
		if time.Now().After(deadline) {
			t.Fatal("Wait() never blocked on the events stream")
		}
		time.Sleep(time.Millisecond)
	}
	var fin []Finished
	for _, j := range jobs {
		fin = append(fin, Finished{Job: j})
	}
	if _, _, err := b.ackFinished(ctx, "default", fin, 0, time.Minute, "w"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Wait() = %v, want the job done", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait() did not return after the batch ack")
	}
}

// blockedOnXRead reports whether the connection named name is in a blocking XREAD.
func blockedOnXRead(c *Client, name string) bool {
	for _, line := range strings.Split(c.rdb.ClientList(ctx).Val(), "\n") {
		if strings.Contains(line, "name="+name+" ") && strings.Contains(line, "cmd=xread") {
			return true
		}
	}
	return false
}

// A newline in an event's values cannot split the event: worker IDs are cleaned by the
// client, an error or postpone reason by the script.
func TestEventsNewlinesStayInOneEvent(t *testing.T) {
	c := setup(t, Config{})
	b := c.broker()
	id, err := c.Enqueue(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := b.Claim(ctx, "default", 1, time.Minute, "w\n1\t2")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim() = %v, %v", jobs, err)
	}
	if err := b.Postpone(ctx, jobs[0], time.Hour, "lock held\nby someone"); err != nil {
		t.Fatal(err)
	}
	got := readEvents(t, c, nil, "0", 3)
	if got[1].Worker != "w 1 2" || got[2].Name != EventPostponed || got[2].Error != "lock held by someone" ||
		got[2].ID != id {
		t.Errorf("events %+v, want worker \"w 1 2\" and a postponed event with error \"lock held by someone\"", got)
	}
}
