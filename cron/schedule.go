package cron

import (
	"fmt"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// schedule computes an entry's ticks: the first tick after t, or the zero time when there
// is none. robfig/cron does the parsing and the field matching; its types stay inside
// this package so that users of cron never depend on them.
type schedule interface {
	Next(t time.Time) time.Time
}

// parser accepts 5 or 6 fields (seconds optional) and descriptors; CRON_TZ= / TZ=
// prefixes are handled by robfig's parser.
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour |
	robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// parseSchedule parses a spec into its schedule, with @every aligned to multiples of its
// interval (robfig's counts from whenever it is asked, which differs per scheduler) and
// fixed wall times fired once per day across daylight-saving changes (see wallClock).
// A spec that never fires (February 30) is an error: robfig's Next returns the zero time
// for it, which a scheduler would take as a tick long due, again and again.
func parseSchedule(spec string) (s schedule, err error) {
	// robfig's parser panics on some malformed input ("TZ=" with nothing after it, found
	// by FuzzParseEntry): a bad spec must be an error, never a crash.
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("cron spec %q: malformed", spec)
		}
	}()
	parsed, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("cron spec %q: %w", spec, err)
	}
	switch p := parsed.(type) {
	case robfig.ConstantDelaySchedule:
		// robfig rounds a sub-second interval up to 1s and drops fractions of a second
		// ("@every 0s" would fire every second, "@every 1500ms" every 1s): say so instead.
		_, rest, _ := strings.Cut(spec, "@every")
		if d, err := time.ParseDuration(strings.TrimSpace(rest)); err == nil && (d < time.Second || d%time.Second != 0) {
			return nil, fmt.Errorf("cron spec %q: @every takes whole seconds, at least 1s", spec)
		}
		s = aligned{p.Delay}
	case *robfig.SpecSchedule:
		if !zoned(spec) {
			// robfig reads a spec without a zone in the process's local one: schedulers on
			// hosts set to different zones would fire the same entry at different instants,
			// each tick a job of its own. UTC is every host's, as asynq's scheduler does.
			p.Location = time.UTC
		}
		s = p
		if !wildTime(spec) {
			utc := *p
			utc.Location = time.UTC
			s = wallClock{spec: &utc, loc: p.Location}
		}
	default:
		s = parsed
	}
	// robfig searches five years ahead before it gives up: every date a spec can match
	// (February 29 included) comes round within that.
	if s.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("cron spec %q never fires: no date matches it", spec)
	}
	return s, nil
}

// aligned fires at every multiple of d (since Go's zero time; for intervals that divide
// a day, at the same clock times every day).
type aligned struct{ d time.Duration }

func (a aligned) Next(t time.Time) time.Time { return t.Truncate(a.d).Add(a.d) }

// zoned reports whether spec names its time zone (a CRON_TZ= or TZ= prefix).
func zoned(spec string) bool {
	return strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=")
}

// wildTime reports whether spec's second, minute or hour field is a wildcard ("*", "*/n",
// "?"; @hourly), the test system cron (vixie, cronie) applies on a daylight-saving change:
// such entries follow real time (both passes of a repeated hour, nothing in a skipped
// one), the others fire each wall time once (wallClock).
func wildTime(spec string) bool {
	if zoned(spec) {
		_, spec, _ = strings.Cut(spec, " ")
	}
	fields := strings.Fields(spec)
	if len(fields) > 0 && strings.HasPrefix(fields[0], "@") {
		return fields[0] == "@hourly"
	}
	if len(fields) == 5 { // seconds omitted: 0
		fields = append([]string{"0"}, fields...)
	}
	for _, f := range fields[:min(3, len(fields))] {
		if strings.HasPrefix(f, "*") || strings.HasPrefix(f, "?") {
			return true
		}
	}
	return false
}

// wallClock fires each wall time of loc that spec matches once, as system cron does for
// entries with fixed times: a time the clocks skip (the hour lost in spring) fires at the
// moment they jump past it; a time they show twice (the hour repeated in autumn) fires at
// its first occurrence only. robfig/cron alone skips the first and fires the second twice.
type wallClock struct {
	spec *robfig.SpecSchedule // matched against wall times written as UTC: no DST there
	loc  *time.Location       // the spec's zone (UTC without one); time.Local (CRON_TZ=Local): t's location
}

func (w wallClock) Next(t time.Time) time.Time {
	loc := w.loc
	if loc == time.Local {
		loc = t.Location()
	}
	lt := t.In(loc)
	from := wall(lt)
	// In the second pass of a repeated hour every wall time up to the end of it has had its
	// first occurrence already: start after them.
	if start, _ := lt.ZoneBounds(); !start.IsZero() {
		_, off := lt.Zone()
		_, prev := start.Add(-time.Second).In(loc).Zone()
		if back := time.Duration(prev-off) * time.Second; back > 0 && t.Before(start.Add(back)) {
			if end := wall(start.In(time.FixedZone("", prev))).Add(-time.Nanosecond); end.After(from) {
				from = end
			}
		}
	}
	// The first candidate is after t but for zones stranger than a DST change; bounded
	// so that no zone can make this loop forever.
	for range 1000 {
		from = w.spec.Next(from)
		if from.IsZero() {
			return time.Time{}
		}
		if at := instant(from, loc); at.After(t) {
			return at.In(t.Location())
		}
	}
	return time.Time{}
}

// wall is the wall time t shows, written as a UTC time.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant is the first moment loc's clocks show wall (written as UTC), or, when they skip
// it, the moment they jump past it.
func instant(w time.Time, loc *time.Location) time.Time {
	// Zone offsets are within ±14h: the offsets in force a day either side are the ones
	// that can apply to w.
	_, before := w.Add(-24 * time.Hour).In(loc).Zone()
	_, after := w.Add(24 * time.Hour).In(loc).Zone()
	var first time.Time
	for _, off := range []int{before, after} {
		at := w.Add(-time.Duration(off) * time.Second)
		if wall(at.In(loc)).Equal(w) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if !first.IsZero() {
		return first
	}
	// Skipped: read with the earlier (smaller) offset, w is a moment after the jump; the
	// zone in force then began at the jump.
	start, _ := w.Add(-time.Duration(min(before, after)) * time.Second).In(loc).ZoneBounds()
	return start
}
