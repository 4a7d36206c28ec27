package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

func TestEnqueueFile(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	var b strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&b, `{"type":"t","payload":{"n":%d},"queue":"bulk"}`+"\n", i)
	}
	b.WriteString(`{"type":"s","payload":"plain text","id":"fixed","max_retry":2,"delay":"1h"}` + "\n\n")
	b.WriteString(`{"type":"s","id":"fixed"}` + "\n")
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	os.WriteFile(path, []byte(b.String()), 0o644)
	r := jobs(t, p, "", "enqueue", "--file", path)
	if r.code != 0 || !strings.Contains(r.stdout, "enqueued 2501 jobs (1 duplicates skipped)") {
		t.Fatalf("enqueue --file = %+v", r)
	}
	client, _ := queue.NewClient(redistest.Client(t), queue.Config{Prefix: p})
	ctx := context.Background()
	j, err := client.Get(ctx, "default", "fixed")
	if err != nil || string(j.Payload) != "plain text" || j.MaxRetry != 2 || j.State != queue.StateScheduled {
		t.Errorf("fixed job = %+v, %v", j, err)
	}
	got, _ := client.List(ctx, "bulk", queue.StateReady, 0, 1)
	if len(got) != 1 || string(got[0].Payload) != `{"n":0}` {
		t.Errorf("first bulk job = %+v", got)
	}
	if r := jobs(t, p, `{"type":"a"}`+"\n", "enqueue", "--file", "-"); r.code != 0 || !strings.Contains(r.stdout, "enqueued 1 jobs") {
		t.Errorf("enqueue --file - = %+v", r)
	}
}

func TestEnqueueFileStopsAtBadLine(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, tc := range []struct {
		name, content, want string
	}{
		{"malformed", "{\"type\":\"a\"}\n{\"type\":\"a\"}\n{\"type\":\n{\"type\":\"a\"}\n", "line 3: not a job object"},
		{"unknown field", "{\"type\":\"a\"}\n{\"type\":\"a\"}\n{\"type\":\"a\",\"dealy\":\"5s\"}\n", `line 3: not a job object: unknown field "dealy"`},
		{"bad type", "{\"type\":\"a\"}\n{\"type\":\"a\"}\n{\"type\":\"\"}\n", "line 3: job type"},
		{"bad delay", "{\"type\":\"a\"}\n{\"type\":\"a\"}\n{\"type\":\"a\",\"delay\":\"soon\"}\n", `line 3: delay "soon"`},
	} {
		q := strings.ReplaceAll(tc.name, " ", "")
		content := strings.ReplaceAll(tc.content, `"type":"a"`, `"type":"a","queue":"`+q+`"`)
		r := jobs(t, p, content, "enqueue", "--file", "-")
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "2 jobs from the lines above were enqueued") {
			t.Errorf("%s: exit %d stderr %q; want 2 mentioning %q and the count", tc.name, r.code, r.stderr, tc.want)
		}
		client, _ := queue.NewClient(redistest.Client(t), queue.Config{Prefix: p})
		if got, _ := client.List(context.Background(), q, queue.StateReady, 0, 10); len(got) != 2 {
			t.Errorf("%s: %d jobs enqueued, want the 2 before the bad line", tc.name, len(got))
		}
	}
	if r := jobs(t, p, "", "enqueue", "--file", "/nonexistent"); r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("missing file = %+v", r)
	}
	if r := jobs(t, p, "", "enqueue", "--file", "-", "--max-retry", "1"); r.code != 2 {
		t.Errorf("--file with --max-retry = %+v, want exit 2", r)
	}
}

// Lines that used to be half-read: a second JSON value or trailing garbage after the job
// object was dropped silently; a UTF-8 byte order mark made line 1 "invalid character
// 'ï'"; a line over the size limit was reported as the line before it.
func TestEnqueueFileLineParsing(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, tc := range []struct {
		name, content, want string
	}{
		{"second value", `{"type":"a"}` + "\n" + `{"type":"a"} {"type":"b"}` + "\n", "line 2: "},
		{"trailing garbage", `{"type":"a"}` + "\n" + `{"type":"a"}x` + "\n", "line 2: "},
		{"trailing brace", `{"type":"a"}` + "\n" + `{"type":"a"}}` + "\n", "line 2: "},
		{"long line", `{"type":"a"}` + "\n" + `{"type":"a","payload":"` + strings.Repeat("x", 3<<20) + `"}` + "\n", "line 2: "},
	} {
		r := jobs(t, p, tc.content, "enqueue", "--file", "-")
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want an error naming %q", tc.name, r.code, r.stderr, tc.want)
		}
	}
	r := jobs(t, p, "\xef\xbb\xbf"+`{"type":"bom","queue":"bom"}`+"\n", "enqueue", "--file", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "enqueued 1 jobs") {
		t.Errorf("a file starting with a UTF-8 BOM: %+v, want its job enqueued", r)
	}
}

// On a Redis that fills up, --file used to count refused jobs as enqueued and exit 0. It
// now names the lines not enqueued (in one line when one cause refused them all, as a full
// Redis does), counts only what was written, and exits 1.
func TestEnqueueFileReportsRefusedLines(t *testing.T) {
	t.Parallel()
	srv := redistest.Own(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	var b strings.Builder
	for range 3000 {
		fmt.Fprintf(&b, `{"type":"t","payload":"%s"}`+"\n", strings.Repeat("p", 1500))
	}
	r := runCLI(b.String(), "--redis", "redis://"+srv.Addr, "enqueue", "--file", "-")
	client, _ := queue.NewClient(srv.Client(t), queue.Config{})
	st, _ := client.Stats(context.Background())
	if r.code != 1 || len(st) != 1 {
		t.Fatalf("enqueue --file on a Redis filling up = %+v; want exit 1", r)
	}
	want := fmt.Sprintf("-: %d jobs enqueued in all; ", st[0].Ready)
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "OOM") {
		t.Errorf("stderr ends %q; want the count enqueued (%d, as in Redis), the lines refused and why", r.stderr[max(0, len(r.stderr)-300):], st[0].Ready)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("not enqueued (lines %d", st[0].Ready+1)) ||
		strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "out of memory") {
		t.Errorf("stderr %q does not name line %d, the first refused, in one line saying Redis is out of memory",
			r.stderr[max(0, len(r.stderr)-300):], st[0].Ready+1)
	}
}
