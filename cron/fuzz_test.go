package cron

import (
	"testing"
	"time"
)

// FuzzParseEntry: any --cron text is parsed or refused with an error, never a panic, and
// an accepted spec always yields a next tick after now.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{"nightly '0 0 3 * * *' report", "x '@every 5s' t '{}'", "tz 'CRON_TZ=Europe/Paris 0 0 9 * * *' t",
		"a '@every 0s' t", "a 'TZ=Nowhere/City * * * * *' t", "a '* * * * * * *' t", `a "x" b c d e`, "'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEntry(s)
		if err != nil {
			return
		}
		sched, err := Schedule(e.Spec)
		if err != nil {
			t.Fatalf("ParseEntry accepted %q but Schedule refuses it: %v", e.Spec, err)
		}
		now := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
		if next := sched.Next(now); !next.IsZero() && !next.After(now) {
			t.Fatalf("spec %q: next tick %s is not after %s", e.Spec, next, now)
		}
	})
}
