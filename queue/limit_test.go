package queue

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
)

// claimLimited claims up to n jobs of q as worker "w" (lease 30s) through AckClaimLimited.
func claimLimited(t *testing.T, c *Client, q string, n int) ([]*Job, proto.Limited) {
	t.Helper()
	_, jobs, lim, err := c.broker().AckClaimLimited(ctx, q, nil, nil, n, 30*time.Second, "w")
	if err != nil {
		t.Fatalf("AckClaimLimited() err = %v", err)
	}
	return jobs, lim
}

// The concurrency limit counts unexpired leases: a claim takes only the free slots, says
// it met the limit and until when at the latest (the earliest lease deadline), and an
// ack that frees a slot while jobs are ready pushes one wake token for it.
func TestConcurrencyLimitCountsLeases(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	if err := c.SetLimit(ctx, "default", Limit{Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 10)
	c.rdb.Del(ctx, qk.wake) // the enqueues' tokens
	jobs, lim := claimLimited(t, c, "default", 10)
	if len(jobs) != 3 || lim.By != proto.LimitConcurrency || lim.Concurrency != 3 {
		t.Fatalf("claim of 10 under concurrency 3 = %d jobs, %+v; want 3, by concurrency", len(jobs), lim)
	}
	if lim.Wait < 29*time.Second || lim.Wait > 31*time.Second {
		t.Errorf("wait = %v, want about the lease (30s): the earliest lease deadline", lim.Wait)
	}
	if more, lim := claimLimited(t, c, "default", 5); len(more) != 0 || lim.By != proto.LimitConcurrency {
		t.Errorf("claim at the limit = %d jobs, %+v; want none, by concurrency", len(more), lim)
	}
	if err := c.broker().Ack(ctx, jobs[0], nil); err != nil {
		t.Fatal(err)
	}
	if n := c.rdb.LLen(ctx, qk.wake).Val(); n != 1 {
		t.Errorf("wake tokens after an ack freed a slot = %d, want 1", n)
	}
	if more, _ := claimLimited(t, c, "default", 5); len(more) != 1 {
		t.Errorf("claim after one slot freed = %d jobs, want 1", len(more))
	}
	// An expired lease frees its slot with nothing to repair: it no longer counts.
	c.rdb.ZAdd(ctx, qk.active, redis.Z{Score: 1, Member: jobs[1].ID})
	if more, _ := claimLimited(t, c, "default", 5); len(more) != 1 {
		t.Errorf("claim after a lease expired = %d jobs, want 1", len(more))
	}
}

// A claim far from the concurrency limit counts the leases with ZCARD (expired ones too,
// until reaped): that count must not make its acks' freed slots look like the only free
// ones and push wake tokens no waiting worker needs. Here 2 of 3 slots are taken by live
// leases and one lease expired: acking both live jobs frees slots of a queue that was not
// full, so no token.
func TestConcurrencyWakeIgnoresExpiredLeases(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	if err := c.SetLimit(ctx, "default", Limit{Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 10)
	jobs, _ := claimLimited(t, c, "default", 3)
	if len(jobs) != 3 {
		t.Fatalf("claim of 3 under concurrency 3 = %d jobs", len(jobs))
	}
	c.rdb.ZAdd(ctx, qk.active, redis.Z{Score: 1, Member: jobs[1].ID}) // its lease expired
	c.rdb.Del(ctx, qk.wake)                                           // the enqueues' tokens
	acked, got, _, err := c.broker().AckClaimLimited(ctx, "default", []*Job{jobs[0], jobs[2]}, [][]byte{nil, nil}, 1,
		30*time.Second, "w")
	if err != nil || len(acked) != 2 || acked[0] != nil || acked[1] != nil || len(got) != 1 {
		t.Fatalf("AckClaimLimited() = %v, %d jobs, %v; want 2 acks, 1 job", acked, len(got), err)
	}
	if n := c.rdb.LLen(ctx, qk.wake).Val(); n != 0 {
		t.Errorf("wake tokens after acks on a queue that was not full = %d, want 0", n)
	}
}

// gcraModel is the test's model of a queue rate's GCRA (limit_room in scripts/lib), by
// Redis's clock: a claim at now takes the tokens due within 20ms (rate_ahead), each job
// starting at its token's instant or now, whichever is later. The claims are checked
// against it from their own Redis times, so one that a loaded machine made late (a sleep
// that overslept, a stalled process) is held to the same exact rule as one on time.
type gcraModel struct {
	tau   time.Duration
	burst int
	tat   time.Time
}

// claim is what a claim of n jobs at now gets: each job's start.
func (g *gcraModel) claim(now time.Time, n int) []time.Time {
	base := g.tat
	if now.After(base) {
		base = now
	}
	tokens := 0
	if ahead := now.Add(20*time.Millisecond + time.Duration(g.burst)*g.tau).Sub(base); ahead > 0 {
		tokens = int(ahead / g.tau)
	}
	var starts []time.Time
	for k := 1; k <= min(n, tokens); k++ {
		start := base.Add(time.Duration(k-g.burst) * g.tau)
		if start.Before(now) {
			start = now
		}
		starts = append(starts, start)
	}
	g.tat = base.Add(time.Duration(len(starts)) * g.tau)
	return starts
}

// nextToken is when the next token is due, as Limits reports it at at: zero when a start
// is allowed then.
func (g *gcraModel) nextToken(at time.Time) time.Time {
	due := g.tat.Add(-time.Duration(g.burst-1) * g.tau)
	if due.After(at) {
		return due
	}
	return time.Time{}
}

// checkClaim checks the jobs a claim of n got against the model at the claim's Redis time.
func (g *gcraModel) checkClaim(t *testing.T, what string, jobs []*Job, lim proto.Limited, n int) {
	t.Helper()
	want := g.claim(lim.Now, n)
	var got []time.Time
	for _, j := range jobs {
		got = append(got, j.StartedAt)
	}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("%s at %v: jobs start at %v, want %v (GCRA)", what, lim.Now, got, want)
	}
}

// The rate follows GCRA: a burst of B at once, then one token per period/rate; the
// claim that meets it says exactly when the next token is due, and a job claimed 20ms
// ahead of its token starts at the token's instant.
func TestRateLimitGCRA(t *testing.T) {
	c := setup(t, Config{})
	if err := c.SetLimit(ctx, "default", Limit{Rate: 5, Period: time.Second, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 10)
	jobs, lim := claimLimited(t, c, "default", 10)
	if len(jobs) != 2 || lim.By != proto.LimitRate {
		t.Fatalf("claim of 10 under rate 5/s burst 2 = %d jobs, %+v; want 2, by rate", len(jobs), lim)
	}
	t1 := lim.Now
	if !jobs[0].StartedAt.Equal(t1) || !jobs[1].StartedAt.Equal(t1) {
		t.Errorf("the burst's jobs start at %v and %v, want both at the claim's time %v", jobs[0].StartedAt, jobs[1].StartedAt, t1)
	}
	g := gcraModel{tau: 200 * time.Millisecond, burst: 2}
	g.claim(t1, 10)
	// Two tokens spent at t1: tat = t1+400ms, and the next is due at tat - (burst-1)*200ms;
	// the next claim may come 20ms before (rate_ahead in scripts/lib).
	if lim.Wait != 180*time.Millisecond {
		t.Errorf("wait = %v, want 180ms", lim.Wait)
	}
	more, lim := claimLimited(t, c, "default", 10)
	if lim.Now.Before(t1.Add(180*time.Millisecond)) && (len(more) != 0 || lim.By != proto.LimitRate) {
		t.Errorf("claim with no token = %d jobs, %+v; want none, by rate", len(more), lim)
	}
	g.checkClaim(t, "the claim right after", more, lim, 8)
	ready := 8 - len(more)
	time.Sleep(lim.Wait)
	more, lim = claimLimited(t, c, "default", 10)
	// On time, it runs 20ms before the next token is due, and its job starts at the
	// token's instant, t1 + 200ms, not at the claim; a claim the machine made late starts
	// its job at once: later, never before the token.
	if lim.Now.Before(t1.Add(200 * time.Millisecond)) {
		if len(more) != 1 || !more[0].StartedAt.Equal(t1.Add(200*time.Millisecond)) {
			t.Errorf("claim %v before the next token = %d jobs, want 1, starting at the token's instant", t1.Add(200*time.Millisecond).Sub(lim.Now), len(more))
		}
	} else {
		t.Logf("the claim meant to come 20ms before the token came %v after it", lim.Now.Sub(t1.Add(200*time.Millisecond)))
	}
	g.checkClaim(t, "the claim after the wait", more, lim, ready)
	s, err := c.Limits(ctx)
	if err != nil || len(s) != 1 {
		t.Fatalf("Limits() = %+v, %v; want one queue", s, err)
	}
	want := g.nextToken(s[0].At)
	if !s[0].NextToken.Equal(want) || (s[0].Waiting() == RateLimit) != !want.IsZero() {
		t.Errorf("Limits() = %+v (waiting %q); want the next token at %v (GCRA), waiting on the rate until then", s[0], s[0].Waiting(), want)
	}
}

// Limits change live: the next claim applies them, removing the last one deletes the
// hash, and an unlimited queue's claim is untouched.
func TestLimitChangedLive(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	enqueueN(t, c, 20)
	if err := c.SetLimit(ctx, "default", Limit{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := claimLimited(t, c, "default", 5); len(jobs) != 1 {
		t.Errorf("claim under concurrency 1 = %d jobs, want 1", len(jobs))
	}
	if err := c.SetLimit(ctx, "default", Limit{Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := claimLimited(t, c, "default", 5); len(jobs) != 3 {
		t.Errorf("claim after raising to 4 = %d jobs, want 3", len(jobs))
	}
	// A rate added keeps the concurrency limit.
	if err := c.SetLimit(ctx, "default", Limit{Rate: 1, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if got := c.rdb.HGetAll(ctx, qk.limit).Val(); got["concurrency"] != "4" || got["rate"] != "1" || got["period_ms"] != "3600000" || got["burst"] != "1" {
		t.Errorf("limit hash = %v, want concurrency 4, rate 1 per 3600000ms, burst 1", got)
	}
	if err := c.RemoveLimit(ctx, "default", ConcurrencyLimit); err != nil {
		t.Fatal(err)
	}
	if jobs, lim := claimLimited(t, c, "default", 5); len(jobs) != 1 || lim.By != proto.LimitRate || lim.Wait < 59*time.Minute {
		t.Errorf("claim under rate 1/h = %d jobs, %+v; want 1, then by rate for about an hour", len(jobs), lim)
	}
	if err := c.RemoveLimit(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if n := c.rdb.Exists(ctx, qk.limit).Val(); n != 0 {
		t.Errorf("limit hash exists after removing every limit")
	}
	if jobs, lim := claimLimited(t, c, "default", 5); len(jobs) != 5 || lim != (proto.Limited{Now: lim.Now}) {
		t.Errorf("claim with no limit = %d jobs, %+v; want 5, no limit", len(jobs), lim)
	}
	if s, err := c.Limits(ctx); err != nil || len(s) != 0 {
		t.Errorf("Limits() with none = %+v, %v; want none", s, err)
	}
}

// Bad limits are refused with one line naming what is wrong, and write nothing.
func TestSetLimitRefusesBadInput(t *testing.T) {
	c := setup(t, Config{})
	for _, tc := range []struct {
		l    Limit
		want string
	}{
		{Limit{}, "no limit given"},
		{Limit{Concurrency: -1}, "concurrency -1"},
		{Limit{Rate: -5, Period: time.Second}, "rate -5"},
		{Limit{Rate: 5}, "period 0s"},
		{Limit{Rate: 5, Period: 1500 * time.Microsecond}, "whole milliseconds"},
		{Limit{Rate: 5, Period: time.Second, Burst: -1}, "burst -1"},
		{Limit{Burst: 3}, "needs a rate"},
		{Limit{Rate: 2_000_000, Period: time.Second}, "over one job per microsecond"},
		{Limit{Concurrency: MaxLimit + 1}, "concurrency 1000000001"},
	} {
		err := c.SetLimit(ctx, "default", tc.l)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("SetLimit(%+v) err = %v, want one line of ErrInvalid saying %q", tc.l, err, tc.want)
		}
	}
	if err := c.SetLimit(ctx, "bad queue", Limit{Concurrency: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetLimit(bad queue) err = %v, want ErrInvalid", err)
	}
	if err := c.RemoveLimit(ctx, "default", "speed"); !errors.Is(err, ErrInvalid) {
		t.Errorf("RemoveLimit(speed) err = %v, want ErrInvalid", err)
	}
	if n := c.rdb.Exists(ctx, c.keys.queue("default").limit).Val(); n != 0 {
		t.Errorf("a refused limit wrote the limit hash")
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in     string
		n      int
		period time.Duration
		bad    string
	}{
		{in: "20/s", n: 20, period: time.Second},
		{in: "100/1m", n: 100, period: time.Minute},
		{in: "5/500ms", n: 5, period: 500 * time.Millisecond},
		{in: " 3 / h", n: 3, period: time.Hour},
		{in: "20", bad: "want N/PERIOD"},
		{in: "0/s", bad: "positive integer"},
		{in: "-1/s", bad: "positive integer"},
		{in: "x/s", bad: "positive integer"},
		{in: "5/fortnight", bad: "positive duration"},
		{in: "5/", bad: "positive duration"},
		{in: "5/-1s", bad: "positive duration"},
	} {
		n, p, err := ParseRate(tc.in)
		switch {
		case tc.bad != "":
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("ParseRate(%q) err = %v, want ErrInvalid saying %q", tc.in, err, tc.bad)
			}
		case err != nil || n != tc.n || p != tc.period:
			t.Errorf("ParseRate(%q) = %d, %v, %v; want %d, %v", tc.in, n, p, err, tc.n, tc.period)
		}
	}
}

// A limit event says what the limits are now in a line that does not grow with the keys
// that have limits of their own: each change once wrote every key's limits (and the
// hash's internal flags), so a thousand SetKeyLimit calls filled Redis with events.
func TestLimitEventStaysShort(t *testing.T) {
	c := setup(t, Config{})
	last := func() string {
		t.Helper()
		evs, err := c.RecentEvents(ctx, []string{"default"}, 1)
		if err != nil || len(evs) != 1 || evs[0].Name != EventLimit {
			t.Fatalf("RecentEvents() = %+v, %v; want the limit event", evs, err)
		}
		return evs[0].Error
	}
	if err := c.SetLimit(ctx, "default", Limit{Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	if got := last(); got != "concurrency 3" {
		t.Errorf("event after SetLimit(concurrency 3) = %q, want %q", got, "concurrency 3")
	}
	if err := c.SetLimit(ctx, "default", Limit{KeyConcurrency: 2, KeyRate: 5, KeyPeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	if got, want := last(), "concurrency 3, every key concurrency 2 rate 5/1000ms burst 1"; got != want {
		t.Errorf("event after the keys' default = %q, want %q", got, want)
	}
	for i := range 300 {
		if err := c.SetKeyLimit(ctx, "default", Limit{KeyConcurrency: 1}, fmt.Sprintf("customer:%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	want := "concurrency 3, every key concurrency 2 rate 5/1000ms burst 1, 300 keys with limits of their own, key customer:299 concurrency 1"
	if got := last(); got != want {
		t.Errorf("event after 300 keys' own limits = %q, want %q", got, want)
	}
	if err := c.RemoveKeyLimit(ctx, "default", "customer:7"); err != nil {
		t.Fatal(err)
	}
	if got := last(); !strings.HasSuffix(got, "299 keys with limits of their own, key customer:7 back to the default") {
		t.Errorf("event after a key's own limits were removed = %q", got)
	}
}
