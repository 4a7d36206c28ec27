package queue

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A job at the defaults stores neither max_retry nor timeout_ms, and a generated ID's
// time stands for created_at: readers see the same facts as from the long hash. A
// 100-byte payload in 64-byte pieces keeps the hash in listpack encoding.
func TestJobHashLeavesDefaultsOut(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	payload := bytes.Repeat([]byte("p"), 100)
	before := time.Now().Add(-time.Millisecond)
	single, err := c.Enqueue(ctx, "email", payload, MaxRetry(DefaultMaxRetry))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.EnqueueBatch(ctx, []BatchJob{{Type: "email", Payload: payload}, {Type: "email", Payload: payload}})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	for _, id := range []string{single, res[0].ID, res[1].ID} {
		h := c.rdb.HGetAll(ctx, qk.job(id)).Val()
		want := map[string]string{"type": "email", "state": "ready", "payload": string(payload[:64]),
			"payload+1": string(payload[64:])}
		if !maps.Equal(h, want) {
			t.Errorf("job %s hash = %v, want %v", id, h, want)
		}
		if enc := c.rdb.ObjectEncoding(ctx, qk.job(id)).Val(); enc != "listpack" {
			t.Errorf("job %s encoding = %s, want listpack", id, enc)
		}
		j, err := c.Get(ctx, "default", id)
		if err != nil {
			t.Fatal(err)
		}
		if j.MaxRetry != DefaultMaxRetry || j.Timeout != DefaultTimeout || !bytes.Equal(j.Payload, payload) {
			t.Errorf("job %s = max retry %d, timeout %s, payload %q; want the defaults and its payload", id,
				j.MaxRetry, j.Timeout, j.Payload)
		}
		if j.CreatedAt.Before(before) || j.CreatedAt.After(after) || !j.CreatedAt.Equal(idTime(id)) {
			t.Errorf("job %s created %s, want its ID's time %s, between %s and %s", id, j.CreatedAt, idTime(id),
				before, after)
		}
	}
	// Other values, and a caller's own ID, are written as before.
	own, err := c.Enqueue(ctx, "email", nil, ID("order-1"), MaxRetry(0), Timeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h := c.rdb.HGetAll(ctx, qk.job(own)).Val()
	if h["max_retry"] != "0" || h["timeout_ms"] != "60000" || msTime(h["created_at"]).IsZero() {
		t.Errorf("job with its own ID and settings = %v, want max_retry 0, timeout_ms 60000, created_at", h)
	}
	if j, _ := c.Get(ctx, "default", own); j.MaxRetry != 0 || j.Timeout != time.Minute ||
		!j.CreatedAt.Equal(msTime(h["created_at"])) {
		t.Errorf("job with its own ID = %d, %s, %s; want 0, 1m, its created_at", j.MaxRetry, j.Timeout, j.CreatedAt)
	}
}

// created_at is left out only when the generated ID's time is at most 1 s before Redis's
// clock: an ID made by a client whose clock is ahead, or far behind, keeps the field
// (Redis's time), on the one-job path of the script and on the general one alike.
func TestCreatedAtOnlyFromAnIDNearRedisClock(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	for _, tc := range []struct {
		name    string
		offset  time.Duration
		written bool
	}{{"300ms behind", -300 * time.Millisecond, false}, {"5s behind", -5 * time.Second, true},
		{"5s ahead", 5 * time.Second, true}} {
		for _, n := range []int{1, 2} {
			now, err := c.rdb.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			var jobs []prepared
			for k := range n {
				p, err := c.prepare(BatchJob{Type: "a"}, now)
				if err != nil {
					t.Fatal(err)
				}
				p.id = encodeID(uint64(now.Add(tc.offset).UnixMilli()), uint64(k), uint64(n))
				jobs = append(jobs, p)
			}
			if _, err := sendPrepared(c, jobs); err != nil {
				t.Fatal(err)
			}
			for _, p := range jobs {
				created := c.rdb.HGet(ctx, qk.job(p.id), "created_at").Val()
				if (created != "") != tc.written {
					t.Errorf("%s, %d jobs: created_at = %q, want written %v", tc.name, n, created, tc.written)
				}
				j, err := c.Get(ctx, "default", p.id)
				if err != nil {
					t.Fatal(err)
				}
				if want := idTime(p.id); !tc.written && !j.CreatedAt.Equal(want) {
					t.Errorf("%s: created %s, want the ID's time %s", tc.name, j.CreatedAt, want)
				}
				if tc.written && (j.CreatedAt.Before(now.Add(-time.Millisecond)) || j.CreatedAt.After(time.Now().Add(time.Second))) {
					t.Errorf("%s: created %s, want Redis's time at enqueue (after %s)", tc.name, j.CreatedAt, now)
				}
			}
		}
	}
}

// The one-job path of enqueue.lua writes the same hash as the general path, whatever
// the payload's size (one piece, several, one large field).
func TestEnqueueOneJobPathWritesWhatTheGeneralPathDoes(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	for _, size := range []int{0, 1, 64, 65, 100, 200, 4096, 4097} {
		payload := bytes.Repeat([]byte("x"), size)
		for _, opts := range [][]Option{nil, {MaxRetry(3)}, {Timeout(time.Minute)}} {
			one, err := c.Enqueue(ctx, "t", payload, opts...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.EnqueueBatch(ctx, []BatchJob{{Type: "t", Payload: payload, Options: opts},
				{Type: "t", Payload: payload, Options: opts}})
			if err != nil {
				t.Fatal(err)
			}
			a, b := c.rdb.HGetAll(ctx, qk.job(one)).Val(), c.rdb.HGetAll(ctx, qk.job(res[0].ID)).Val()
			// created_at is the other test's: here, an enqueue slowed past 1 s by a busy
			// machine would write it on one path and not the other.
			delete(a, "created_at")
			delete(b, "created_at")
			if !maps.Equal(a, b) {
				t.Errorf("payload %d, %d options: one job's hash %v, a batch's %v; want the same", size, len(opts), a, b)
			}
			if j, err := c.Get(ctx, "default", one); err != nil || !bytes.Equal(j.Payload, payload) {
				t.Errorf("payload %d: read back %d bytes, %v", size, len(j.Payload), err)
			}
		}
	}
	if n := c.rdb.LLen(ctx, qk.ready).Val(); n != 8*3*3 {
		t.Errorf("ready holds %d jobs, want %d", n, 8*3*3)
	}
	if n := c.rdb.LLen(ctx, qk.wake).Val(); n != 8*3*3 {
		t.Errorf("wake holds %d tokens, want %d", n, 8*3*3)
	}
}

// oldHash writes a job the way enqueue.lua wrote every job before it left fields at
// their defaults out: max_retry, timeout_ms and created_at always there.
func oldHash(t *testing.T, c *Client, id string, maxRetry int, created time.Time, payload []byte) {
	t.Helper()
	qk := c.keys.queue("default")
	fields := []any{"type", "old", "max_retry", strconv.Itoa(maxRetry), "timeout_ms", "1800000",
		"created_at", strconv.FormatInt(created.UnixMilli(), 10), "state", "ready", "payload", string(payload[:64]),
		"payload+1", string(payload[64:])}
	if err := c.rdb.HSet(ctx, qk.job(id), fields...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.rdb.LPush(ctx, qk.ready, id).Err(); err != nil {
		t.Fatal(err)
	}
	c.rdb.SAdd(ctx, c.keys.queues(), "default")
}

// A running system upgrades in place: hashes written before fields were left out at
// their defaults read the same (Get, List, a claim, the queue's latency), and their own
// max_retry still decides a failure and a reap; the new short hashes take the defaults.
func TestOldJobHashesReadTheSame(t *testing.T) {
	c := setup(t, Config{})
	b := c.broker()
	payload := bytes.Repeat([]byte("o"), 100)
	hourAgo := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	// The ID's own time is not its created_at: the field wins.
	oldID := encodeID(uint64(time.Now().UnixMilli()), 1, 2)
	oldHash(t, c, oldID, 0, hourAgo, payload)
	stats, err := c.StatsOf(ctx, "default")
	if err != nil || len(stats) != 1 || stats[0].Latency < 59*time.Minute || stats[0].Latency > 2*time.Hour {
		t.Errorf("latency with an old hour-old job at the head = %+v, %v; want about an hour", stats, err)
	}
	for _, read := range []func() *Job{
		func() *Job { j, _ := c.Get(ctx, "default", oldID); return j },
		func() *Job {
			jobs, _ := c.List(ctx, "default", StateReady, 0, 10)
			if len(jobs) != 1 {
				t.Fatalf("List(ready) = %d jobs, want 1", len(jobs))
			}
			return jobs[0]
		},
	} {
		j := read()
		if j == nil || j.MaxRetry != 0 || j.Timeout != DefaultTimeout || !j.CreatedAt.Equal(hourAgo) ||
			!bytes.Equal(j.Payload, payload) || j.Type != "old" || j.State != StateReady {
			t.Fatalf("old hash read = %+v, want max retry 0, 30m, created %s, its payload", j, hourAgo)
		}
	}
	// A short hash whose ID is half an hour old (as left by a slow enqueue) at the head:
	// the latency comes from the ID.
	qk := c.keys.queue("default")
	old := claimOne(t, c, "default", time.Minute, "w")
	if old.ID != oldID || old.MaxRetry != 0 || old.Timeout != DefaultTimeout || !old.CreatedAt.Equal(hourAgo) ||
		!bytes.Equal(old.Payload, payload) {
		t.Errorf("claimed old hash = %+v, want max retry 0, 30m, created %s, its payload", old, hourAgo)
	}
	shortID := encodeID(uint64(time.Now().Add(-30*time.Minute).UnixMilli()), 3, 4)
	c.rdb.HSet(ctx, qk.job(shortID), "type", "new", "state", "ready", "payload", "x")
	c.rdb.LPush(ctx, qk.ready, shortID)
	stats, err = c.StatsOf(ctx, "default")
	if err != nil || len(stats) != 1 || stats[0].Latency < 29*time.Minute || stats[0].Latency > time.Hour {
		t.Errorf("latency with a short half-hour-old job at the head = %+v, %v; want about 30 min", stats, err)
	}
	short := claimOne(t, c, "default", time.Minute, "w")
	if short.ID != shortID || short.MaxRetry != DefaultMaxRetry || short.Timeout != DefaultTimeout ||
		!short.CreatedAt.Equal(idTime(shortID)) {
		t.Errorf("claimed short hash = %+v, want the defaults and its ID's time", short)
	}
	// Failures: the old job's max_retry 0 sends it to dead, the short one's default to retry.
	if st, err := b.Fail(ctx, short, "boom", time.Hour); err != nil || st != StateRetry {
		t.Errorf("Fail(short hash) = %s, %v; want retry (max_retry absent = %d)", st, err, DefaultMaxRetry)
	}
	if st, err := b.Fail(ctx, old, "boom", time.Hour); err != nil || st != StateDead {
		t.Errorf("Fail(old hash, max_retry 0) = %s, %v; want dead", st, err)
	}
	// Reaps: the same decisions when a lease expires.
	oldHash(t, c, "old-reaped", 0, hourAgo, payload)
	c.rdb.HSet(ctx, qk.job("short-reaped"), "type", "new", "state", "ready", "payload", "x",
		"created_at", strconv.FormatInt(hourAgo.UnixMilli(), 10))
	c.rdb.LPush(ctx, qk.ready, "short-reaped")
	jobs, err := b.Claim(ctx, "default", 2, time.Millisecond, "w")
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Claim(2) = %d, %v", len(jobs), err)
	}
	eventually(t, 5*time.Second, "both leases reaped", func() bool {
		n, err := b.Reap(ctx, "default")
		return err == nil && n == 0 && c.rdb.ZCard(ctx, qk.active).Val() == 0
	})
	if st := c.rdb.HGet(ctx, qk.job("old-reaped"), "state").Val(); st != "dead" {
		t.Errorf("reaped old hash with max_retry 0 = %s, want dead", st)
	}
	if st := c.rdb.HGet(ctx, qk.job("short-reaped"), "state").Val(); st != "ready" {
		t.Errorf("reaped short hash = %s, want ready (max_retry absent = %d)", st, DefaultMaxRetry)
	}
}

// Events that repeat the one before in an entry are their job's ID alone; readers see
// every event in full, and a line that starts no event is skipped.
func TestEventsRepeatedAsIDs(t *testing.T) {
	c := setup(t, Config{})
	stream := c.keys.queue("default").events
	ids := enqueueN(t, c, 20)
	mixed, err := c.EnqueueBatch(ctx, []BatchJob{{Type: "a"}, {Type: "b"}, {Type: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := c.rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil || len(entries) != 3 {
		t.Fatalf("XRANGE = %d entries, %v; want 3", len(entries), err)
	}
	lines := func(m redis.XMessage) []string { return strings.Split(m.Values["event"].(string), "\n") }
	first, second, third := lines(entries[0]), lines(entries[1]), lines(entries[2])
	if want := "enqueued\t" + ids[0] + "\tt\t0\t\t"; first[0] != want || !slices.Equal(first[1:], ids[1:16]) {
		t.Errorf("first entry = %q, want %q then the next IDs alone", first, want)
	}
	if want := "enqueued\t" + ids[16] + "\tt\t0\t\t"; second[0] != want || !slices.Equal(second[1:], ids[17:]) {
		t.Errorf("second entry = %q, want %q (an entry starts in full) then the next IDs alone", second, want)
	}
	if len(third) != 3 || !strings.Contains(third[1], "\t") || third[2] != mixed[2].ID {
		t.Errorf("third entry = %q, want a, b in full, then the second b's ID alone", third)
	}
	var want []string
	for _, id := range ids {
		want = append(want, "enqueued "+id+" 0 ")
	}
	for _, r := range mixed {
		want = append(want, "enqueued "+r.ID+" 0 ")
	}
	var got []string
	for _, e := range readEvents(t, c, nil, "0", len(want)) {
		got = append(got, summary(e))
		if e.Type == "" {
			t.Errorf("event %s has no type", summary(e))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// An ID line after a line that is no event, or an empty line, is no event either.
	evs := decodeEntry("q", redis.XMessage{ID: "1-0", Values: map[string]any{"event": "bad\tline\nX\n\n" +
		"done\tA\tt\t1\tw\t\nB\n\nC"}})
	var sums []string
	for _, e := range evs {
		sums = append(sums, summary(e)+" "+e.Type)
	}
	if want := []string{"done A 1 w t", "done B 1 w t"}; !slices.Equal(sums, want) {
		t.Errorf("decodeEntry = %q, want %q", sums, want)
	}
}

// idTime reads back the time encodeID wrote, and nothing from what is not a ULID.
func TestIDTime(t *testing.T) {
	at := time.UnixMilli(1733380000123)
	id := encodeID(uint64(at.UnixMilli()), 0xffff, 42)
	if got := idTime(id); !got.Equal(at) {
		t.Errorf("idTime(%s) = %s, want %s", id, got, at)
	}
	for _, bad := range []string{"", "order-1", strings.ToLower(id), id[:25], id + "0", id[:12] + "U" + id[13:],
		"00000000000000000000000000", "ZZZZZZZZZZ0000000000000000"} {
		if got := idTime(bad); !got.IsZero() {
			t.Errorf("idTime(%q) = %s, want the zero time", bad, got)
		}
	}
}
