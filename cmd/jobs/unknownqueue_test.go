package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// TestUnknownQueueRefused: `jobs tail nosuch` waited forever without a word and `jobs
// stats --history 1h --queue nosuch` printed 60 rows of zeros, where ls and pause say
// there is no such queue. A known queue still tails (until interrupted).
func TestUnknownQueueRefused(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	if r := jobs(t, p, "", "enqueue", "--queue", "known", "t"); r.code != 0 {
		t.Fatalf("enqueue = %+v", r)
	}
	addr := "redis://" + redistest.Shared(t).Addr
	tail := func(timeout time.Duration, args ...string) result {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cliMu.Lock()
		defer cliMu.Unlock()
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"jobs", "--redis", addr, "--prefix", p}, args...), strings.NewReader(""), &out, &errb)
		return result{out.String(), errb.String(), code}
	}
	want := "jobs: no queue \"nosuch\" (no job was ever enqueued on it)\n"
	if r := tail(time.Minute, "tail", "known", "nosuch"); r.code != 1 || r.stderr != want {
		t.Errorf("tail known nosuch = %+v, want exit 1 and %q", r, want)
	}
	if r := tail(time.Second, "tail", "--since", "0", "known"); r.code != 0 || !strings.Contains(r.stdout, "enqueued") {
		t.Errorf("tail known = %+v, want its enqueued event, then exit 0 when interrupted", r)
	}
	for _, args := range [][]string{
		{"stats", "--history", "1h", "--queue", "nosuch"},
		{"stats", "--history", "24h", "--queue", "known", "--queue", "nosuch"},
	} {
		if r := jobs(t, p, "", args...); r.code != 1 || r.stderr != want || r.stdout != "" {
			t.Errorf("jobs %q = %+v, want exit 1 and %q alone", args, r, want)
		}
	}
	if r := jobs(t, p, "", "stats", "--history", "1h", "--queue", "known"); r.code != 0 || !strings.Contains(r.stdout, "queue known") {
		t.Errorf("stats --history --queue known = %+v", r)
	}
}

// TestLimitRmOfNothing: jobs limit rm of a queue without limits, or of a limit key
// without its own, exited 0 without a word. It says there was nothing to remove (exit 1);
// with some keys that had limits and some that had none, it removes those and names the
// others.
func TestLimitRmOfNothing(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, args := range [][]string{
		{"limit", "set", "q1", "--rate", "5/s", "--key-concurrency", "1"},
		{"limit", "set", "q1", "--key", "a", "--key", "b", "--key-concurrency", "2"},
	} {
		if r := jobs(t, p, "", args...); r.code != 0 {
			t.Fatalf("jobs %q = %+v", args, r)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"limit", "rm", "nosuch"}, 1, "jobs: queue nosuch has no limits: nothing to remove\n"},
		{[]string{"limit", "rm", "q1", "--key", "nope"}, 1, "jobs: queue q1: limit key nope has no limits of its own: nothing to remove\n"},
		{[]string{"limit", "rm", "q1", "--concurrency"}, 1, "jobs: queue q1 has no concurrency limit: nothing to remove\n"},
		{[]string{"limit", "rm", "q1", "--key", "a", "--key", "nope"}, 1,
			"jobs: queue q1: limit key nope has no limits of its own: the other keys' limits were removed\n"},
		{[]string{"limit", "rm", "q1", "--key", "a"}, 1, "jobs: queue q1: limit key a has no limits of its own: nothing to remove\n"},
		{[]string{"limit", "rm", "q1", "--key", "b"}, 0, ""},
		{[]string{"limit", "rm", "q1", "--rate", "--concurrency"}, 0, ""},
		{[]string{"limit", "rm", "q1"}, 0, ""},
		{[]string{"limit", "rm", "q1"}, 1, "jobs: queue q1 has no limits: nothing to remove\n"},
	} {
		if r := jobs(t, p, "", tc.args...); r.code != tc.code || r.stderr != tc.want {
			t.Errorf("jobs %q = %+v, want exit %d and %q", tc.args, r, tc.code, tc.want)
		}
	}
	if r := jobs(t, p, "", "limit", "ls", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("limit ls after removing all = %+v, want none", r)
	}
}
