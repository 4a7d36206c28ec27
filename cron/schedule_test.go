package cron

import (
	"cmp"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// A spec that matches no date (February 30) is refused when added, not stored to spin
// every scheduler.
func TestNeverFiringSpecRefused(t *testing.T) {
	t.Parallel()
	st := NewStore(newClient(t))
	for _, spec := range []string{"0 0 30 2 *", "0 0 0 31 4 *", "CRON_TZ=America/New_York 0 0 30 2 *"} {
		err := st.Add(ctx, Entry{Name: "never", Spec: spec, Type: "t"})
		if err == nil || !strings.Contains(err.Error(), "never fires") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Add(spec %q) err = %v, want one line saying it never fires", spec, err)
		}
	}
	// A leap day fires every four years: accepted.
	if err := st.Add(ctx, Entry{Name: "leap", Spec: "0 0 29 2 *", Type: "t"}); err != nil {
		t.Errorf("Add(leap day) err = %v", err)
	}
}

// A never-firing entry already in Redis (an older version, or redis-cli) is skipped: no
// job dated year 1, no busy loop, and the other entries fire on time.
func TestStoredNeverFiringEntryIsSkipped(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	b, _ := json.Marshal(Entry{Name: "never", Spec: "0 0 30 2 *", Type: "t"})
	broker.Of(c).Redis().HSet(ctx, proto.CronKeysOf(c.Config().Prefix).Entries, "never", b)
	s, err := New(c, Config{Logger: quiet(), Entries: []Entry{{Name: "good", Spec: "@every 1s", Type: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	plan := map[string]*planned{}
	s.reload(ctx, plan, time.Now(), true)
	if p, ok := plan["never"]; ok && !p.next.IsZero() {
		t.Errorf("never-firing entry planned for %s", p.next)
	}
	start := time.Now().Unix() + 1
	runScheduler(t, c, Config{Entries: []Entry{{Name: "good", Spec: "@every 1s", Type: "t"}}})
	time.Sleep(2300 * time.Millisecond)
	if _, err := c.Get(ctx, queue.DefaultQueue, JobID("never", time.Time{})); err == nil {
		t.Errorf("a job dated year 1 was enqueued")
	}
	if n := broker.Of(c).Redis().LLen(ctx, keyPrefix(c)+":{default}:ready").Val(); n > 4 {
		t.Errorf("%d jobs in 2.3s from one @every 1s entry", n)
	}
	if got := cronJobs(t, c, "good", start, start+1); len(got) != 2 {
		t.Errorf("good entry fired ticks %v of %d..%d", got, start, start+1)
	}
}

// Entries whose job Enqueue would refuse are refused when added, with the queue
// package's own validation.
func TestEntryRefusedByEnqueueIsRefusedAtAdd(t *testing.T) {
	t.Parallel()
	c, err := queue.NewClient(redistest.Client(t), queue.Config{Prefix: redistest.Prefix(t), MaxPayload: 16})
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(c)
	for _, tc := range []struct {
		e    Entry
		want string
	}{
		{Entry{Name: "long", Spec: "@hourly", Type: strings.Repeat("t", 129)}, "job type"},
		{Entry{Name: "ctl", Spec: "@hourly", Type: "a\x01b"}, "control"},
		{Entry{Name: "q", Spec: "@hourly", Type: "t", Queue: "no/slash"}, "queue name"},
		{Entry{Name: "big", Spec: "@hourly", Type: "t", Payload: strings.Repeat("x", 17)}, "payload too large"},
		{Entry{Name: "n\x01", Spec: "@hourly", Type: "t"}, "name"},
	} {
		err := st.Add(ctx, tc.e)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Add(%q) err = %v, want ErrInvalid, one line mentioning %q", tc.e.Name, err, tc.want)
		}
		if _, err := New(c, Config{Entries: []Entry{tc.e}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(entry %q) err = %v, want ErrInvalid", tc.e.Name, err)
		}
	}
	if list, _ := st.List(ctx); len(list) != 0 {
		t.Errorf("List() = %+v after refused adds", list)
	}
}

// An entry Enqueue refuses, already in Redis, neither fires nor delays the others: each
// tick of a per-second entry next to it is enqueued.
func TestRefusedEntryDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, e := range []Entry{
		{Name: "bad1", Spec: "@every 1s", Type: strings.Repeat("t", 129)},
		{Name: "bad2", Spec: "@every 1s", Type: "a\x01b"},
	} {
		b, _ := json.Marshal(e)
		broker.Of(c).Redis().HSet(ctx, proto.CronKeysOf(c.Config().Prefix).Entries, e.Name, b)
	}
	start := time.Now().Unix() + 1
	runScheduler(t, c, Config{Entries: []Entry{{Name: "good", Spec: "@every 1s", Type: "t"}}})
	time.Sleep(3300 * time.Millisecond)
	end := start + 2
	got := cronJobs(t, c, "good", start, end)
	for tick := start; tick <= end; tick++ {
		if !got[tick] {
			t.Errorf("tick %d of the good entry has no job", tick)
		}
	}
}

// With CRON_TZ, each wall time fires once, as system cron does: a time in the hour lost in
// spring runs right after the jump, a time in the hour repeated in autumn runs at its first
// occurrence. Entries with a wildcard second, minute or hour follow real time.
func TestDaylightSavingFiresEachWallTimeOnce(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	const tz = "CRON_TZ=America/New_York "
	spring := time.Date(2026, 3, 8, 0, 0, 0, 0, ny) // 02:00 EST -> 03:00 EDT
	fall := time.Date(2026, 11, 1, 0, 0, 0, 0, ny)  // 02:00 EDT -> 01:00 EST
	cases := []struct {
		spec  string
		from  time.Time
		hours int      // ticks within this many hours of from; 0: 24
		want  []string // as wall time in New York
	}{
		{tz + "30 1 * * *", fall, 0, []string{"01:30 EDT"}},
		{tz + "0 30 1 * * *", fall, 0, []string{"01:30 EDT"}},
		{tz + "30 2 * * *", spring, 0, []string{"03:00 EDT"}},
		{tz + "30 1 * * *", spring, 0, []string{"01:30 EST"}},
		{tz + "30 2 * * *", fall, 0, []string{"02:30 EST"}},
		{tz + "15,45 2 * * *", spring, 0, []string{"03:00 EDT"}},
		{tz + "0 1-3 * * *", spring, 0, []string{"01:00 EST", "03:00 EDT"}},
		{tz + "0 1-3 * * *", fall, 0, []string{"01:00 EDT", "02:00 EST", "03:00 EST"}},
		{tz + "@daily", spring, 0, []string{"00:00 EDT"}}, // the next midnight
		{tz + "0 * * * *", fall.Add(30 * time.Minute), 4, []string{"01:00 EDT", "01:00 EST", "02:00 EST", "03:00 EST"}},
		{tz + "0 * * * *", spring.Add(30 * time.Minute), 4, []string{"01:00 EST", "03:00 EDT", "04:00 EDT", "05:00 EDT"}},
	}
	for _, tc := range cases {
		e := Entry{Name: "dst", Spec: tc.spec, Type: "t"}
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
		var got []string
		limit := tc.from.Add(time.Duration(cmp.Or(tc.hours, 24)) * time.Hour)
		for x := e.Next(tc.from); !x.IsZero() && x.Before(limit); x = e.Next(x) {
			got = append(got, x.In(ny).Format("15:04 MST"))
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s from %s: ticks %v, want %v", tc.spec, tc.from.Format(time.DateOnly), got, tc.want)
		}
	}
	// Asked from inside the repeated hour, a daily entry that ran in its first pass waits
	// for tomorrow; one not yet reached in the first pass still fires in it.
	e := Entry{Spec: tz + "30 1 * * *"}
	if got, want := e.Next(time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC)), time.Date(2026, 11, 2, 1, 30, 0, 0, ny); !got.Equal(want) {
		t.Errorf("Next(01:10 EST, second pass) = %s, want %s", got.In(ny), want)
	}
	if got, want := e.Next(time.Date(2026, 11, 1, 5, 10, 0, 0, time.UTC)), time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Next(01:10 EDT, first pass) = %s, want %s", got.In(ny), want)
	}
}

// Around DST changes (half-hour ones in Lord Howe, a skipped day in Apia in 2011) a
// fixed-time schedule always has a next tick, later than the last, and no wall time twice.
func TestWallClockTicksAdvance(t *testing.T) {
	t.Parallel()
	starts := []time.Time{time.Date(2011, 12, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 4, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC)}
	for _, zone := range []string{"America/New_York", "Australia/Lord_Howe", "Pacific/Apia"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Skip(err)
		}
		for _, fields := range []string{"0 0-59 0-23 * * *", "30 2 * * *", "15,45 0-3 * * *"} {
			spec := "CRON_TZ=" + zone + " " + fields
			s, err := parseSchedule(spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, start := range starts {
				seen := map[time.Time]bool{}
				for x := start; x.Before(start.Add(72 * time.Hour)); {
					next := s.Next(x)
					if !next.After(x) {
						t.Fatalf("%s: Next(%s) = %s, want a later time", spec, x.In(loc), next)
					}
					if w := wall(next.In(loc)); seen[w] {
						t.Errorf("%s: wall time %s fired twice", spec, w.Format(time.DateTime))
					} else {
						seen[w] = true
					}
					x = next
				}
			}
		}
	}
}

// An entry whose enqueue fails on Redis (its queue's ready list is a string, so every
// attempt errors and is retried with backoff) does not hold up another entry's ticks.
func TestFailingEnqueueDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	broker.Of(c).Redis().Set(ctx, keyPrefix(c)+":{broken}:ready", "not a list", 0)
	start := time.Now().Unix() + 1
	runScheduler(t, c, Config{Entries: []Entry{
		{Name: "broken", Spec: "@every 1s", Type: "t", Queue: "broken"},
		{Name: "good", Spec: "@every 1s", Type: "t"},
	}})
	time.Sleep(3300 * time.Millisecond)
	end := start + 2
	got := cronJobs(t, c, "good", start, end)
	for tick := start; tick <= end; tick++ {
		if !got[tick] {
			t.Errorf("tick %d of the good entry has no job", tick)
		}
	}
}
