package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
)

func TestStatsRetryCancelPausePurge(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	id := func(r result) string { return strings.TrimSpace(r.stdout) }
	a := id(jobs(t, p, "", "enqueue", "--queue", "mail", "t"))
	b := id(jobs(t, p, "", "enqueue", "--queue", "mail", "--delay", "1h", "t"))

	r := jobs(t, p, "", "stats", "--json")
	var got struct {
		Queues []map[string]any `json:"queues"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Queues) != 1 {
		t.Fatalf("stats --json = %q, %v", r.stdout, err)
	}
	q := got.Queues[0]
	for k, v := range map[string]any{"name": "mail", "ready": 1.0, "scheduled": 1.0, "active": 0.0,
		"retry": 0.0, "dead": 0.0, "done": 0.0, "paused": false, "processed_today": 0.0, "failed_today": 0.0} {
		if q[k] != v {
			t.Errorf("stats --json %s = %v, want %v", k, q[k], v)
		}
	}
	if r := jobs(t, p, "", "stats"); !strings.Contains(r.stdout, "PROCESSED TODAY") || !strings.Contains(r.stdout, "mail") {
		t.Errorf("stats = %q", r.stdout)
	}

	if r := jobs(t, p, "", "cancel", b); r.code != 0 || !strings.Contains(r.stdout, "cancelled") {
		t.Fatalf("cancel = %+v", r)
	}
	if r := jobs(t, p, "", "cancel", b); r.code != 1 || !strings.Contains(r.stderr, "it is dead") {
		t.Errorf("cancel dead = %+v, want exit 1", r)
	}
	if r := jobs(t, p, "", "retry", b); r.code != 0 {
		t.Errorf("retry dead = %+v", r)
	}
	if r := jobs(t, p, "", "retry", a); r.code != 1 || !strings.Contains(r.stderr, "it is ready") {
		t.Errorf("retry ready = %+v, want exit 1", r)
	}
	jobs(t, p, "", "cancel", a)
	jobs(t, p, "", "cancel", b)
	if r := jobs(t, p, "", "retry", "--all-dead", "--queue", "mail"); r.code != 0 || !strings.Contains(r.stdout, "2 dead jobs") {
		t.Errorf("retry --all-dead = %+v", r)
	}

	if r := jobs(t, p, "", "pause", "mail"); r.code != 0 {
		t.Errorf("pause = %+v", r)
	}
	if r := jobs(t, p, "", "stats", "--json"); !strings.Contains(r.stdout, `"paused":true`) {
		t.Errorf("stats after pause = %q", r.stdout)
	}
	if r := jobs(t, p, "", "resume", "mail"); r.code != 0 {
		t.Errorf("resume = %+v", r)
	}

	if r := jobs(t, p, "", "purge", "mail", "--state", "ready"); r.code != 2 || !strings.Contains(r.stderr, "would delete 2 ready jobs") {
		t.Errorf("purge without --yes = %+v", r)
	}
	if r := jobs(t, p, "", "purge", "mail", "--state", "ready", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "deleted 2") {
		t.Errorf("purge --yes = %+v", r)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"retry"}, 2, "one job ID"},
		{[]string{"retry", "--all-dead"}, 2, "needs --queue"},
		{[]string{"retry", "--all-dead", "--queue", "nope"}, 1, "no queue"},
		{[]string{"retry", "NOPE"}, 1, "no job NOPE"},
		{[]string{"cancel", "NOPE"}, 1, "no job NOPE"},
		{[]string{"cancel"}, 2, "one job ID"},
		{[]string{"pause", "nope"}, 1, "no queue"},
		{[]string{"pause"}, 2, "one queue"},
		{[]string{"resume", "a b"}, 2, "queue name"},
		{[]string{"purge", "mail"}, 2, "--state"},
		{[]string{"purge", "mail", "--state", "active", "--yes"}, 2, "--state"},
		{[]string{"purge", "nope", "--state", "dead", "--yes"}, 1, "no queue"},
		{[]string{"stats", "x"}, 2, "no arguments"},
	} {
		r := jobs(t, p, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("jobs %v = exit %d, stderr %q; want %d mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}
