package cron

import (
	"fmt"
	"strconv"
	"strings"
)

// Describe says when spec fires, in words ("at 03:00, on Monday through Friday"), for
// the dashboard's cron page. It is "" when spec is not valid, or uses a form it does not
// put in words (the spec itself is shown beside it anyway).
func Describe(spec string) string {
	if _, err := parseSchedule(spec); err != nil {
		return ""
	}
	tz := ""
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		var zone string
		zone, spec, _ = strings.Cut(spec, " ")
		_, tz, _ = strings.Cut(zone, "=")
		tz = " (" + tz + " time)"
	}
	spec = strings.TrimSpace(spec)
	if d, ok := strings.CutPrefix(spec, "@every"); ok {
		return "every " + strings.TrimSpace(d) + tz
	}
	if words, ok := descriptors[spec]; ok {
		return words + tz
	}
	f := strings.Fields(spec)
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	if len(f) != 6 {
		return ""
	}
	at, ok := timeWords(f[0], f[1], f[2])
	if !ok {
		return ""
	}
	days, ok := dayWords(f[3], f[4], f[5])
	if !ok {
		return ""
	}
	return at + ", " + days + tz
}

var descriptors = map[string]string{
	"@yearly": "at 00:00 on January 1", "@annually": "at 00:00 on January 1",
	"@monthly": "at 00:00 on day 1 of every month", "@weekly": "at 00:00 every Sunday",
	"@daily": "at 00:00 every day", "@midnight": "at 00:00 every day", "@hourly": "at minute 0 of every hour",
}

// timeWords puts the second, minute and hour fields in words.
func timeWords(sec, min, hour string) (string, bool) {
	s, sok := strconv.Atoi(sec)
	m, mok := strconv.Atoi(min)
	h, hok := strconv.Atoi(hour)
	if sok == nil && mok == nil && hok == nil {
		if s == 0 {
			return fmt.Sprintf("at %02d:%02d", h, m), true
		}
		return fmt.Sprintf("at %02d:%02d:%02d", h, m, s), true
	}
	sw, okS := fieldWords(sec, "second", nil)
	mw, okM := fieldWords(min, "minute", nil)
	hw, okH := fieldWords(hour, "hour", nil)
	if !okS || !okM || !okH {
		return "", false
	}
	// A wildcard says "every" only below fixed finer fields: "0 * * * * *" is every
	// minute, "30 0 * * * *" at second 30 of minute 0 of every hour, but "*/10 * * * * *"
	// every 10 seconds, not "every 10 seconds of every minute of every hour".
	switch sec {
	case "*":
		sw = "every second"
	case "0":
		sw = "" // on the minute: the usual, not worth a word
	}
	if min == "*" && fixed(sec) {
		mw = "every minute"
	}
	if hour == "*" && fixed(sec) && fixed(min) {
		hw = "every hour"
	}
	var parts []string
	for _, p := range []string{sw, mw, hw} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "", false
	}
	w := strings.Join(parts, " of ")
	if !strings.HasPrefix(w, "every") {
		w = "at " + w
	}
	return w, true
}

// fixed reports whether a field names its values (5, 0-10, 1,15) rather than a wildcard
// or a step.
func fixed(field string) bool { return !strings.ContainsAny(field, "*?/") }

// dayWords puts the day-of-month, month and day-of-week fields in words. As in cron,
// a day matches when either day field matches if both are restricted.
func dayWords(dom, month, dow string) (string, bool) {
	d, ok := fieldWords(dom, "day", nil)
	if !ok {
		return "", false
	}
	w, ok := fieldWords(dow, "", weekdays)
	if !ok {
		return "", false
	}
	mo, ok := fieldWords(month, "", months)
	if !ok {
		return "", false
	}
	var days string
	switch {
	case d == "" && w == "":
		days = "every day"
	case w == "":
		days = "on " + d + " of the month"
	case d == "":
		days = "on " + w
	default:
		days = "on " + d + " of the month or on " + w
	}
	if mo != "" {
		days += ", in " + mo
	}
	return days, true
}

var weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

var months = []string{"", "January", "February", "March", "April", "May", "June", "July", "August", "September",
	"October", "November", "December"}

// fieldWords puts one field in words: "" for a wildcard; with names (weekdays, months)
// values are named ("Monday through Friday"), else counted in unit ("minutes 5 and 35",
// "every 10 seconds", "hours 9 through 17").
func fieldWords(field, unit string, names []string) (string, bool) {
	if field == "*" || field == "?" {
		return "", true
	}
	name := func(v string) (string, bool) {
		if names == nil {
			n, err := strconv.Atoi(v)
			return strconv.Itoa(n), err == nil
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n < len(names) && names[n] != "" {
			return names[n], true
		}
		for _, x := range names { // robfig takes the first three letters: MON, jan
			if len(v) == 3 && x != "" && strings.EqualFold(x[:3], v) {
				return x, true
			}
		}
		return "", false
	}
	var out []string
	plural := false
	for _, part := range strings.Split(field, ",") {
		span, step, stepped := strings.Cut(part, "/")
		lo, hi, ranged := strings.Cut(span, "-")
		var w string
		switch {
		case stepped && (span == "*" || span == "?") && names == nil:
			return "every " + step + " " + unit + "s", strings.Count(field, ",") == 0 && isNum(step)
		case stepped:
			return "", false // stepped ranges and names: left to the spec itself
		case ranged:
			a, okA := name(lo)
			b, okB := name(hi)
			if !okA || !okB {
				return "", false
			}
			w, plural = a+" through "+b, true
		default:
			a, ok := name(span)
			if !ok {
				return "", false
			}
			w = a
		}
		out = append(out, w)
	}
	if len(out) > 1 {
		plural = true
	}
	list := out[0]
	if len(out) > 1 {
		list = strings.Join(out[:len(out)-1], ", ") + " and " + out[len(out)-1]
	}
	if names != nil {
		return list, true
	}
	if plural {
		return unit + "s " + list, true
	}
	return unit + " " + list, true
}

func isNum(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}
