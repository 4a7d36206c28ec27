package main

import (
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// TestMessagesUseCLIWords: errors named Go identifiers ("Delay and At both given",
// "UniqueKey and UniqueUntilExpiry need Unique(ttl)", `invalid value "5x" for flag
// -delay: parse error`, "Go struct field fileJob.max_retry", the period "1x" of --rate
// 5/x, "queue: job not found" of a batch). Each now names the flag or field as typed;
// none says "queue: invalid argument", Go, struct or the flag package's "-delay".
func TestMessagesUseCLIWords(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, tc := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{"enqueue", "--delay", "1m", "--at", "2030-01-01T00:00:00Z", "t"}, 2, "jobs: --delay and --at exclude each other: choose one"},
		{"", []string{"enqueue", "--unique-key", "k", "t"}, 2, "jobs: --unique-key needs --unique-for"},
		{"", []string{"enqueue", "--unique-until-expiry", "t"}, 2, "jobs: --unique-until-expiry needs --unique-for"},
		{"", []string{"enqueue", "--ignore-dependency-failure", "t"}, 2, "jobs: --ignore-dependency-failure needs --after"},
		{"", []string{"enqueue", "--after", "a", "--at", "2030-01-01T00:00:00Z", "t"}, 2, "jobs: --after and --at exclude each other: a job with dependencies runs when they end"},
		{"", []string{"enqueue", "--delay", "5x", "t"}, 2, `jobs: --delay "5x": want a duration such as 30s, 5m or 1h30m`},
		{"", []string{"enqueue", "--max-retry", "x", "t"}, 2, `jobs: --max-retry "x": want a whole number`},
		{"", []string{"enqueue", "--exclusive=maybe", "t"}, 2, `jobs: --exclusive "maybe": want true or false`},
		{"", []string{"enqueue", "t", "--delay"}, 2, "jobs: --delay needs a value"},
		{"", []string{"enqueue", "--nope", "t"}, 2, "jobs: unknown flag --nope; see --help"},
		{"", []string{"enqueue", "--max-retry", "-1", "t"}, 2, "jobs: max retry -1 is negative"},
		{`{"type":"t","max_retry":"3"}` + "\n", []string{"enqueue", "--file", "-"}, 2, `jobs: - line 1: "max_retry": want a whole number, not a JSON string (`},
		{`{"type":"t","delay":5}` + "\n", []string{"enqueue", "--file", "-"}, 2, `jobs: - line 1: "delay": want a string, not a JSON number (`},
		{`[1]` + "\n", []string{"enqueue", "--file", "-"}, 2, `jobs: - line 1: not a job object: a JSON array, want an object`},
		{`{"type":"t","delay":"1m","at":"2030-01-01T00:00:00Z"}` + "\n", []string{"enqueue", "--file", "-", "--batch"}, 2, `jobs: - line 1: "delay" and "at" exclude each other: choose one (nothing enqueued)`},
		{`{"type":"t","unique_key":"k"}` + "\n", []string{"enqueue", "--file", "-"}, 2, `jobs: - line 1: "unique_key" needs "unique_for" (`},
		{"", []string{"limit", "set", "q", "--rate", "5/x"}, 2, `jobs: --rate "5/x": the period "x" must be a positive duration such as s, 10s or 500ms`},
		{"", []string{"limit", "set", "q", "--key-rate", "x/s"}, 2, `jobs: --key-rate "x/s": the count "x" must be a positive integer`},
		{"", []string{"batch", "inspect", "nope"}, 1, "jobs: no batch nope in any queue"},
		{"", []string{"batch", "inspect", "--queue", "default", "nope"}, 1, "jobs: no batch nope in queue default"},
	} {
		r := jobs(t, p, tc.stdin, tc.args...)
		if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("jobs %q = %+v, want exit %d and one line starting %q", tc.args, r, tc.code, tc.want)
		}
		for _, bad := range []string{"invalid argument", "Go ", "struct", " -delay", "parse error", "Unique(", "fileJob"} {
			if strings.Contains(r.stderr, bad) {
				t.Errorf("jobs %q: %q names %q", tc.args, r.stderr, bad)
			}
		}
	}
	if r := jobs(t, p, "", "ls", "default"); r.code != 1 || !strings.Contains(r.stderr, `no queue "default"`) {
		t.Errorf("after the refused enqueues: %+v, want no job enqueued", r)
	}
}
