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
