package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jobs-dev/jobs/internal/printable"
	"github.com/jobs-dev/jobs/queue"
)

// printJob renders one job for a person: one "field  value" line each. Values that come
// from users and handlers go through clean; --json prints them exactly.
func printJob(w io.Writer, j *queue.Job) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("id", clean(j.ID, false))
	row("type", clean(j.Type, false))
	row("queue", clean(j.Queue, false))
	row("state", string(j.State))
	row("attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxRetry+1))
	row("postponed", fmt.Sprint(j.Postponed))
	row("timeout", j.Timeout.String())
	row("created", when(j.CreatedAt))
	row("run at", when(j.RunAt))
	row("started", when(j.StartedAt))
	row("finished", when(j.FinishedAt))
	row("worker", dash(clean(j.Worker, false)))
	if j.ProgressAt.IsZero() {
		row("progress", "-")
	} else {
		msg := clean(j.ProgressMessage, false)
		if msg != "" {
			msg += " "
		}
		row("progress", fmt.Sprintf("%d%% %s(at %s)", j.Progress, msg, when(j.ProgressAt)))
	}
	row("payload", dash(clip(clean(string(j.Payload), true))))
	row("result", dash(clip(clean(string(j.Result), true))))
	row("last error", dash(clip(clean(j.LastError, true))))
	// The history, one line per ended attempt: when, how long, where, how it ended.
	for _, a := range j.Attempts {
		line := fmt.Sprintf("%s  %s  %s  worker %s", a.Outcome, when(a.StartedAt), took(a), dash(clean(a.Worker, false)))
		if a.Error != "" {
			line += "  " + clean(a.Error, false)
		}
		row(fmt.Sprintf("attempt %d", a.Attempt), line)
	}
	tw.Flush()
}

// took is how long an attempt ran, to the millisecond, or "-" when a time is unknown.
func took(a queue.Attempt) string {
	if a.StartedAt.IsZero() || a.FinishedAt.IsZero() {
		return "-"
	}
	return a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// clock is a time soon: its time of day (UTC) within 12 hours of now, which a reader takes
// for today's, else the whole date as when prints it (a key paused for 1000h must not read
// as earlier today).
func clock(t time.Time) string {
	if d := time.Until(t); d < 12*time.Hour && d > -12*time.Hour {
		return t.UTC().Format("15:04:05.000")
	}
	return when(t)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip keeps long values to a screenful; --json prints them whole.
func clip(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n\t")
	if len(s) > 2000 {
		return truncate(s, 2000) + " (cut; --json prints it whole)"
	}
	return s
}

// clean makes s safe to print on a terminal (see printable.Escape); --json is the exact
// form.
func clean(s string, keepNewlines bool) string { return printable.Escape(s, keepNewlines) }

// shown is s for a one-line message: as is when printable, else Go-quoted, so a newline
// cannot split the line and a control byte cannot reach the terminal.
func shown(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	return s
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
