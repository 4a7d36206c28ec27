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

	"github.com/jobs-dev/jobs/queue"
)

// printJob renders one job for a person: one "field  value" line each.
func printJob(w io.Writer, j *queue.Job) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("id", j.ID)
	row("type", j.Type)
	row("queue", j.Queue)
	row("state", string(j.State))
	row("attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxRetry+1))
	row("postponed", fmt.Sprint(j.Postponed))
	row("timeout", j.Timeout.String())
	row("created", when(j.CreatedAt))
	row("run at", when(j.RunAt))
	row("started", when(j.StartedAt))
	row("finished", when(j.FinishedAt))
	row("worker", dash(j.Worker))
	row("payload", dash(clip(string(j.Payload))))
	row("result", dash(clip(string(j.Result))))
	row("last error", dash(clip(j.LastError)))
	tw.Flush()
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
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
		return s[:2000] + " ... (cut; --json prints it whole)"
	}
	return s
}

// shown is s for a one-line message: as is when printable, else Go-quoted, so a newline
// cannot split the line and a control byte cannot reach the terminal.
func shown(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	return s
}
