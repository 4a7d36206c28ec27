package cron

import (
	"testing"
	"time"
)

// FuzzParseEntry: any --cron text is parsed or refused with an error, never a panic, and
// an accepted spec always yields a next tick after now (never the zero time, which a
// scheduler would fire as long due), and is put in words (Describe) without a panic.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{"nightly '0 0 3 * * *' report", "x '@every 5s' t '{}'", "tz 'CRON_TZ=Europe/Paris 0 0 9 * * *' t",
		"a '@every 0s' t", "feb30 '0 0 30 2 *' t", "a 'TZ=Nowhere/City * * * * *' t", "a '* * * * * * *' t", `a "x" b c d e`, "'",
		"w '0 9-17/2 1,15 */2 MON-FRI' t", "w '0 0 1 jan,JUL sun' t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEntry(s)
		if err != nil {
			return
		}
		now := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
		if next := e.Next(now); !next.After(now) {
			t.Fatalf("spec %q: next tick %s is not after %s", e.Spec, next, now)
		}
		_ = Describe(e.Spec)
	})
}
