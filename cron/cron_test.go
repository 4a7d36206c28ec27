package cron

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var ctx = context.Background()

func TestParseEntry(t *testing.T) {
	cases := []struct {
		in   string
		want Entry
		err  string
	}{
		{"nightly '0 0 3 * * *' report", Entry{Name: "nightly", Spec: "0 0 3 * * *", Type: "report"}, ""},
		{`tick '@every 5s' ping '{"a":1}'`, Entry{Name: "tick", Spec: "@every 5s", Type: "ping", Payload: `{"a":1}`}, ""},
		{"h @hourly sweep", Entry{Name: "h", Spec: "@hourly", Type: "sweep"}, ""},
		{"five '*/5 * * * *' t", Entry{Name: "five", Spec: "*/5 * * * *", Type: "t"}, ""},
		{"tz 'CRON_TZ=Europe/Paris 0 0 9 * * *' t", Entry{Name: "tz", Spec: "CRON_TZ=Europe/Paris 0 0 9 * * *", Type: "t"}, ""},
		{"nightly 0 0 3 * * * report", Entry{}, "quoted"},
		{"x 'not a spec' t", Entry{}, "cron spec"},
		{"x '61 * * * * *' t", Entry{}, "cron spec"},
		{"a:b @hourly t", Entry{}, "name"},
		{"x @hourly", Entry{}, "NAME SPEC TYPE"},
		{"x '@hourly t", Entry{}, "unterminated"},
		{"x '@every 0s' t", Entry{}, "whole seconds, at least 1s"},
		{"x '@every 500ms' t", Entry{}, "whole seconds, at least 1s"},
		{"x '@every 1500ms' t", Entry{}, "whole seconds, at least 1s"},
		{"x 'CRON_TZ=UTC @every 1m30s' t", Entry{Name: "x", Spec: "CRON_TZ=UTC @every 1m30s", Type: "t"}, ""},
	}
	for _, tc := range cases {
		got, err := ParseEntry(tc.in)
		if tc.err != "" {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseEntry(%q) err = %v, want ErrInvalid saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.Name != tc.want.Name || got.Spec != tc.want.Spec || got.Type != tc.want.Type || got.Payload != tc.want.Payload {
			t.Errorf("ParseEntry(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestEveryIsAlignedAcrossSchedulers(t *testing.T) {
	s, err := parseSchedule("@every 5s")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, offset := range []time.Duration{0, time.Millisecond, 2300 * time.Millisecond, 4999 * time.Millisecond} {
		if got := s.Next(base.Add(offset)); !got.Equal(base.Add(5 * time.Second)) {
			t.Errorf("Next(+%s) = %s, want +5s", offset, got.Sub(base))
		}
	}
}

func TestLastMissed(t *testing.T) {
	s, _ := parseSchedule("@every 1s")
	now := time.Date(2026, 1, 1, 0, 0, 10, 500e6, time.UTC)
	if got := lastMissed(s, now.Add(-5*time.Second).Truncate(time.Second), now); !got.Equal(now.Truncate(time.Second)) {
		t.Errorf("lastMissed = %s, want %s", got, now.Truncate(time.Second))
	}
	if got := lastMissed(s, time.Time{}, now); !got.IsZero() {
		t.Errorf("lastMissed(never fired) = %s, want zero", got)
	}
	// A month down on a per-second entry: the latest tick, not one from a month ago.
	if got := lastMissed(s, now.AddDate(0, -1, 0), now); !got.Equal(now.Truncate(time.Second)) {
		t.Errorf("lastMissed(a month ago, @every 1s) = %s, want %s", got, now.Truncate(time.Second))
	}
	spec, _ := parseSchedule("* * * * * *") // every second, not aligned: walked
	if got := lastMissed(spec, now.AddDate(0, -1, 0), now); !got.Equal(now.Truncate(time.Second)) {
		t.Errorf("lastMissed(a month ago, every second) = %s, want %s", got, now.Truncate(time.Second))
	}
	monthly, _ := parseSchedule("0 0 0 1 * *")
	if got := lastMissed(monthly, now.AddDate(0, -3, 0), now); got.Month() != now.Month() || got.Day() != 1 {
		t.Errorf("lastMissed(monthly) = %s", got)
	}
}

func newClient(t *testing.T) *queue.Client {
	t.Helper()
	c, err := queue.NewClient(redistest.Client(t), queue.Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestStore(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	st := NewStore(c)
	three := 3
	e := Entry{Name: "a", Spec: "@every 1m", Type: "t", MaxRetry: &three, Exclusive: true}
	if err := st.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := st.Add(ctx, Entry{Name: "b", Spec: "nope", Type: "t"}); err == nil {
		t.Errorf("Add(bad spec) succeeded")
	}
	list, err := st.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "a" || *list[0].MaxRetry != 3 || !list[0].Exclusive {
		t.Fatalf("List() = %+v, %v", list, err)
	}
	v1, _ := st.Version(ctx)
	if err := st.Remove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if v2, _ := st.Version(ctx); v2 <= v1 {
		t.Errorf("version %d after remove, was %d", v2, v1)
	}
	if err := st.Remove(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove(unknown) err = %v, want ErrNotFound", err)
	}
}

// cronJobs returns the IDs of the jobs entry name enqueued, by tick (Unix seconds).
func cronJobs(t *testing.T, c *queue.Client, name string, from, to int64) map[int64]bool {
	t.Helper()
	got := map[int64]bool{}
	for tick := from; tick <= to; tick++ {
		if _, err := c.Get(ctx, queue.DefaultQueue, JobID(name, time.Unix(tick, 0))); err == nil {
			got[tick] = true
		}
	}
	return got
}

func runScheduler(t *testing.T, c *queue.Client, cfg Config) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	s, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(runCtx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// TestExactlyOncePerTickAcrossSchedulers runs three schedulers on a 1-second entry, stops
// one mid-run, and checks that every elapsed tick has exactly one job.
func TestExactlyOncePerTickAcrossSchedulers(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	entry := Entry{Name: "every", Spec: "@every 1s", Type: "tick"}
	var stops []func()
	for range 3 {
		stops = append(stops, runScheduler(t, c, Config{Entries: []Entry{entry}}))
	}
	start := time.Now().Unix() + 1
	time.Sleep(2200 * time.Millisecond)
	stops[0]() // one scheduler dies; the others carry on
	time.Sleep(2000 * time.Millisecond)
	end := time.Now().Unix() - 1
	for _, stop := range stops {
		stop()
	}
	got := cronJobs(t, c, "every", start, end)
	for tick := start; tick <= end; tick++ {
		if !got[tick] {
			t.Errorf("tick %d has no job", tick)
		}
	}
	rdb := broker.Of(c).Redis()
	ready := rdb.LRange(ctx, keyPrefix(c)+":{default}:ready", 0, -1).Val()
	if int64(len(ready)) < end-start+1 || len(ready) > int(end-start+3) {
		t.Errorf("%d jobs for %d ticks", len(ready), end-start+1)
	}
	seen := map[string]bool{}
	for _, id := range ready {
		if seen[id] {
			t.Errorf("job %s enqueued twice", id)
		}
		seen[id] = true
	}
}

func keyPrefix(c *queue.Client) string { return c.Config().Prefix }

func TestDynamicEntriesTakeEffectQuickly(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	runScheduler(t, c, Config{PollInterval: 200 * time.Millisecond})
	time.Sleep(100 * time.Millisecond)
	st := NewStore(c)
	added := time.Now()
	if err := st.Add(ctx, Entry{Name: "dyn", Spec: "@every 1s", Type: "t"}); err != nil {
		t.Fatal(err)
	}
	// Loaded within PollInterval; its first tick is the next whole second.
	deadline := added.Add(2500 * time.Millisecond)
	for {
		states, _ := st.States(ctx)
		if _, ok := states["dyn"]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("added entry never fired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := st.Remove(ctx, "dyn"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // poll 200ms: the removal is seen well within this
	before := broker.Of(c).Redis().LLen(ctx, keyPrefix(c)+":{default}:ready").Val()
	time.Sleep(1500 * time.Millisecond)
	if after := broker.Of(c).Redis().LLen(ctx, keyPrefix(c)+":{default}:ready").Val(); after != before {
		t.Errorf("removed entry still fires: %d jobs, then %d", before, after)
	}
}

func TestCatchUpFiresTheLatestMissedTick(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	st := NewStore(c)
	last := time.Now().Add(-5 * time.Second).Truncate(time.Second)
	if err := st.record(ctx, "hourly", State{LastTick: last}); err != nil {
		t.Fatal(err)
	}
	// Both entries last fired 5s ago; only the catch-up one fires a missed tick on start.
	entries := []Entry{
		{Name: "hourly", Spec: "@every 1s", Type: "t", CatchUp: true},
		{Name: "skip", Spec: "@every 1s", Type: "t"},
	}
	st.record(ctx, "skip", State{LastTick: last})
	stop := runScheduler(t, c, Config{Entries: entries})
	time.Sleep(150 * time.Millisecond)
	stop()
	now := time.Now().Unix()
	var caught, skipped int
	for tick := last.Unix() + 1; tick <= now; tick++ {
		if _, err := c.Get(ctx, queue.DefaultQueue, JobID("hourly", time.Unix(tick, 0))); err == nil {
			caught++
		}
		if _, err := c.Get(ctx, queue.DefaultQueue, JobID("skip", time.Unix(tick, 0))); err == nil {
			skipped++
		}
	}
	// One catch-up tick, plus possibly the regular tick if a second boundary passed.
	if caught < 1 || caught > 2 || skipped > 1 {
		t.Errorf("catch-up entry fired %d ticks, skipping entry %d; want 1(+1) and 0(+1)", caught, skipped)
	}
}

func TestExclusiveEntryJobs(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	two := 2
	runScheduler(t, c, Config{Entries: []Entry{{Name: "ex", Spec: "@every 1s", Type: "t",
		Exclusive: true, MaxRetry: &two, Timeout: time.Minute, Queue: "cronq"}}})
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		ids := broker.Of(c).Redis().LRange(ctx, keyPrefix(c)+":{cronq}:ready", 0, -1).Val()
		if len(ids) > 0 {
			j, err := c.Get(ctx, "cronq", ids[0])
			if err != nil || j.Exclusive != "cron:ex" || j.MaxRetry != 2 || j.Timeout != time.Minute {
				t.Fatalf("cron job = %+v, %v", j, err)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no job fired")
}

func TestNewRejectsBadEntries(t *testing.T) {
	c := newClient(t)
	for _, cfg := range []Config{
		{Entries: []Entry{{Name: "a", Spec: "bad", Type: "t"}}},
		{Entries: []Entry{{Name: "a", Spec: "@hourly", Type: "t"}, {Name: "a", Spec: "@daily", Type: "t"}}},
		{Entries: []Entry{{Name: "a", Spec: "@hourly", Type: ""}}},
		{Entries: []Entry{{Name: "a", Spec: "@hourly", Type: "t", Queue: "no spaces"}}},
	} {
		if _, err := New(c, cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v) err = %v, want ErrInvalid", cfg.Entries, err)
		}
	}
}

// Every way an entry can be wrong is matched by errors.Is(err, ErrInvalid), so a caller
// (an API adding entries from user input) tells a bad entry from a Redis failure.
func TestValidateErrorsAreErrInvalid(t *testing.T) {
	neg, over := -1, queue.MaxRetryLimit+1
	for _, e := range []Entry{
		{Name: "", Spec: "@hourly", Type: "t"},
		{Name: "a b", Spec: "@hourly", Type: "t"},
		{Name: "a", Spec: "nope", Type: "t"},
		{Name: "a", Spec: "0 0 30 2 *", Type: "t"},
		{Name: "a", Spec: "@hourly", Type: ""},
		{Name: "a", Spec: "@hourly", Type: "t", MaxRetry: &neg},
		{Name: "a", Spec: "@hourly", Type: "t", MaxRetry: &over},
		{Name: "a", Spec: "@hourly", Type: "t", Timeout: -time.Second},
		{Name: "a", Spec: "@hourly", Type: "t", Timeout: time.Microsecond},
		{Name: "a", Spec: "@hourly", Type: "t", Queue: "no/slash"},
	} {
		if err := e.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", e, err)
		}
	}
}

// An entry edited at the moment its tick falls due still fires that tick (with the new
// definition); before, the reload planned from "now" and skipped it.
func TestEditAtDueTickKeepsTheTick(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	store := NewStore(c)
	e := Entry{Name: "e", Spec: "@every 10s", Type: "old"}
	if err := store.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	s, err := New(c, Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Now().Truncate(10 * time.Second)
	sched, _ := parseSchedule(e.Spec)
	plan := map[string]*planned{"e": {entry: e, sched: sched, next: tick}}
	e.Type = "new"
	if err := store.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	s.reload(ctx, plan, tick.Add(20*time.Millisecond), false)
	if got := plan["e"]; got.entry.Type != "new" || !got.next.Equal(tick) {
		t.Errorf("after an edit at the due tick: next %s type %q, want %s and %q", got.next, got.entry.Type, tick, "new")
	}
	// An edit between ticks plans from now, as before.
	plan["e"].next = tick.Add(10 * time.Second)
	e.Type = "newer"
	if err := store.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	s.reload(ctx, plan, tick.Add(time.Second), false)
	if got := plan["e"]; got.entry.Type != "newer" || !got.next.Equal(tick.Add(10*time.Second)) {
		t.Errorf("after an edit between ticks: next %s, want %s", got.next, tick.Add(10*time.Second))
	}
}

// TestTriggerRecordsItsTick: Trigger enqueues the job a tick at that second would, and
// records it as the entry's last tick and job (what `jobs cron ls` and the dashboard
// show); a second trigger in the same second is a duplicate and records nothing new.
func TestTriggerRecordsItsTick(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	st := NewStore(c)
	if err := st.Add(ctx, Entry{Name: "report", Spec: "0 3 * * *", Type: "t", Queue: "reports"}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 2, 10, 20, 30, 400_000_000, time.UTC)
	id, err := st.Trigger(ctx, "report", now)
	if err != nil || id != JobID("report", now) {
		t.Fatalf("Trigger() = %q, %v; want %q", id, err, JobID("report", now))
	}
	if j, err := c.Get(ctx, "reports", id); err != nil || j.State != queue.StateReady {
		t.Fatalf("Get(%s) = %+v, %v; want it ready on reports", id, j, err)
	}
	rows, err := st.Listing(ctx, now)
	if err != nil || len(rows) != 1 {
		t.Fatalf("Listing() = %+v, %v", rows, err)
	}
	if r := rows[0]; r.LastJob != id || r.LastTick == nil || !r.LastTick.Equal(now.Truncate(time.Second)) {
		t.Errorf("after Trigger, last job %q tick %v; want %s at %s", r.LastJob, r.LastTick, id, now.Truncate(time.Second))
	}
	if _, err := st.Trigger(ctx, "report", now.Add(100*time.Millisecond)); !errors.Is(err, queue.ErrDuplicate) {
		t.Errorf("second Trigger in the same second err = %v, want queue.ErrDuplicate", err)
	}
	if _, err := st.Trigger(ctx, "nope", now); !errors.Is(err, ErrNotFound) {
		t.Errorf("Trigger(unknown) err = %v, want ErrNotFound", err)
	}
	states, err := st.States(ctx)
	if err != nil || len(states) != 1 {
		t.Errorf("States() = %+v, %v; want the one triggered entry only", states, err)
	}
}
