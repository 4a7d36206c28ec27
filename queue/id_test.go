package queue

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// decodeRandom reads the 80-bit random part of an ID back as (hi, lo).
func decodeRandom(t *testing.T, id string) (hi, lo uint64) {
	t.Helper()
	for _, ch := range id[10:] {
		v := strings.IndexRune(crockford, ch)
		if v < 0 {
			t.Fatalf("ID %q has %q, not Crockford base32", id, ch)
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(v)
	}
	return hi, lo
}

// Within one millisecond a Client's IDs count up from the first one's random part, so
// they strictly increase in the order they are made, concurrent callers included.
func TestIDsAreMonotonicWithinAMillisecond(t *testing.T) {
	t.Parallel()
	var g idGen
	now := time.Now()
	const goroutines, each = 8, 1250
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for k := range goroutines {
		wg.Go(func() {
			for range each {
				ids[k] = append(ids[k], g.next(now))
			}
		})
	}
	wg.Wait()
	var all []string
	for k, seq := range ids {
		for i := 1; i < len(seq); i++ {
			if seq[i] <= seq[i-1] {
				t.Fatalf("goroutine %d: ID %d %q not after %q", k, i, seq[i], seq[i-1])
			}
		}
		all = append(all, seq...)
	}
	slices.Sort(all)
	prefix := all[0][:10]
	hi0, lo0 := decodeRandom(t, all[0])
	for i, id := range all {
		if id[:10] != prefix {
			t.Fatalf("ID %q has time part %q, want %q (all made at one instant)", id, id[:10], prefix)
		}
		hi, lo := decodeRandom(t, id)
		// Consecutive: the i-th smallest is the smallest plus i (no duplicates, no gaps).
		wantLo := lo0 + uint64(i)
		wantHi := hi0
		if wantLo < lo0 {
			wantHi++
		}
		if hi != wantHi || lo != wantLo {
			t.Fatalf("ID %d of %d %q = first + %d, want first + %d", i, len(all), id, lo-lo0, i)
		}
	}

	// A clock that steps back does not break the order; a later millisecond starts afresh.
	last := g.next(now)
	if back := g.next(now.Add(-5 * time.Millisecond)); back <= last {
		t.Errorf("ID after the clock stepped back = %q, want after %q", back, last)
	}
	later := g.next(now.Add(time.Millisecond))
	if later <= last || later[:10] == prefix {
		t.Errorf("ID a millisecond later = %q, want a new time part after %q", later, last)
	}
}

func TestIDCarryAcrossTheRandomPart(t *testing.T) {
	t.Parallel()
	g := idGen{ms: 1000, hi: 0x1234, lo: ^uint64(0)}
	id := g.next(time.UnixMilli(1000))
	if hi, lo := decodeRandom(t, id); hi != 0x1235 || lo != 0 {
		t.Errorf("next after lo = max: random part = %x %x, want 1235 0", hi, lo)
	}
	g = idGen{ms: 1000, hi: 0xffff, lo: ^uint64(0)}
	if id := g.next(time.UnixMilli(1000)); id[:10] != encodeID(1001, 0, 0)[:10] {
		t.Errorf("next after the 80 bits are exhausted = %q, want the next millisecond", id)
	}
}

// Jobs one Client enqueues due at the same instant are promoted and claimed in the order
// they were enqueued: the scheduled set breaks their score tie by ID.
func TestJobsDueTogetherRunInEnqueueOrder(t *testing.T) {
	c := setup(t, Config{})
	at := time.Now().Add(time.Second)
	var want []string
	for range 100 {
		want = append(want, mustEnqueue(t, c, "a", At(at)))
	}
	batch := make([]BatchJob, 100)
	for i := range batch {
		batch[i] = BatchJob{Type: "a", Options: []Option{At(at)}}
	}
	res, err := c.EnqueueBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		want = append(want, r.ID)
	}
	if time.Now().After(at) {
		t.Skip("enqueueing took longer than the delay: the jobs were not scheduled")
	}
	moved := 0
	eventually(t, 3*time.Second, "all 200 promoted", func() bool {
		n, _, err := c.broker().Promote(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		moved += n
		return moved == len(want)
	})
	jobs, err := c.broker().Claim(ctx, "default", len(want), time.Minute, "w")
	if err != nil || len(jobs) != len(want) {
		t.Fatalf("Claim(%d) = %d jobs, %v", len(want), len(jobs), err)
	}
	for i, j := range jobs {
		if j.ID != want[i] {
			t.Fatalf("claimed job %d = %s, want %s (enqueue order)", i, j.ID, want[i])
		}
	}
}

// An ID, type or key that is not valid UTF-8 is refused: --json output would print it
// with U+FFFD for the bad bytes, a name that finds nothing when given back.
func TestNamesMustBeUTF8(t *testing.T) {
	c := setup(t, Config{})
	for _, tc := range []struct {
		typ  string
		opts []Option
	}{
		{"t", []Option{ID("a\xffb")}},
		{"t\xfe", nil},
		{"t", []Option{Unique(time.Minute), UniqueKey("k\xff")}},
		{"t", []Option{Exclusive("\xc3")}},
	} {
		if _, err := c.Enqueue(ctx, tc.typ, nil, tc.opts...); !errors.Is(err, ErrInvalid) ||
			!strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("Enqueue(%q, %d options) err = %v, want ErrInvalid naming UTF-8", tc.typ, len(tc.opts), err)
		}
	}
	if n, _ := c.rdb.LLen(ctx, c.keys.queue("default").ready).Result(); n != 0 {
		t.Errorf("%d jobs written by refused enqueues", n)
	}
}

// idTime reads a generated ID's time back, and nothing from an ID that is not one (a
// caller's own ID, or 26 bytes outside the alphabet: lower case, I, L, O, U, non-ASCII).
func TestIDTimeReadsGeneratedIDsOnly(t *testing.T) {
	for b := range 256 {
		if got, want := int(crockfordValue[b]), strings.IndexByte(crockford, byte(b)); got != want {
			t.Errorf("crockfordValue[%q] = %d, want %d", byte(b), got, want)
		}
	}
	var g idGen
	for _, at := range []time.Time{time.UnixMilli(1), time.UnixMilli(1733380000123), time.UnixMilli(maxJobMs)} {
		if got := idTime(g.next(at)); !got.Equal(at) {
			t.Errorf("idTime(an ID made at %v) = %v", at, got)
		}
	}
	id := g.next(time.UnixMilli(1733380000123))
	for _, bad := range []string{"", "order-42", id[:25], id + "0", strings.ToLower(id), "I" + id[1:],
		id[:12] + "U" + id[13:], id[:25] + "é"[:1], "00000000000000000000000000", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ"} {
		if got := idTime(bad); !got.IsZero() {
			t.Errorf("idTime(%q) = %v, want the zero time", bad, got)
		}
	}
}
