package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// Jobs waiting under a limit key are ready jobs for the CLI: jobs ls (ready is the
// default state) lists them with their key, jobs stats counts them, jobs cancel and retry
// move them, jobs purge --state ready counts and deletes them.
func TestKeyedReadyJobsInTheCLI(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	enqueue := func(args ...string) string {
		t.Helper()
		r := jobs(t, p, "", append([]string{"enqueue", "--queue", "mail"}, args...)...)
		if r.code != 0 {
			t.Fatalf("enqueue %v = %+v", args, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	plain := enqueue("send")
	a1, a2 := enqueue("--limit-key", "cust:A", "send"), enqueue("--limit-key", "cust:A", "send")
	b := enqueue("--limit-key", "cust:B", "send")

	var listed []struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		LimitKey string `json:"limit_key"`
	}
	r := jobs(t, p, "", "ls", "mail", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 4 {
		t.Fatalf("ls --json = %+v (%v), want 4 ready jobs", r, err)
	}
	order := []string{plain, a1, a2, b}
	for i, j := range listed {
		if j.ID != order[i] || j.State != "ready" {
			t.Errorf("ls --json [%d] = %+v, want %s ready (order: plain, then keys in ring order)", i, j, order[i])
		}
	}
	if listed[0].LimitKey != "" || listed[1].LimitKey != "cust:A" || listed[3].LimitKey != "cust:B" {
		t.Errorf("ls --json limit keys = %+v", listed)
	}
	out := jobs(t, p, "", "ls", "mail").stdout
	if !strings.Contains(out, "LIMIT KEY") || !strings.Contains(out, b+"  send  ready  cust:B") ||
		!strings.Contains(out, plain+"  send  ready  -") {
		t.Errorf("ls = %q, want the LIMIT KEY column (- for none)", out)
	}
	if r := jobs(t, p, "", "ls", "mail", "--offset", "2", "--limit", "1", "--json"); !strings.Contains(r.stdout, a2) ||
		strings.Count(r.stdout, `"id"`) != 1 {
		t.Errorf("ls --offset 2 --limit 1 = %q, want %s alone", r.stdout, a2)
	}
	r = jobs(t, p, "", "stats", "--json")
	if !strings.Contains(r.stdout, `"name":"mail","ready":4,`) || !strings.Contains(r.stdout, `"keys_waiting":2`) {
		t.Errorf("stats --json = %s, want mail ready 4, 2 keys waiting", r.stdout)
	}
	if r := jobs(t, p, "", "stats"); !strings.Contains(r.stdout, "mail        0      4") {
		t.Errorf("stats = %s, want mail with 4 ready", r.stdout)
	}

	// cancel: B's only job goes to dead and B leaves the keys; retry brings it back.
	if r := jobs(t, p, "", "cancel", b); r.code != 0 || !strings.Contains(r.stdout, "cancelled (now dead)") {
		t.Fatalf("cancel of a keyed ready job = %+v", r)
	}
	if r := jobs(t, p, "", "stats", "--json"); !strings.Contains(r.stdout, `"ready":3,`) ||
		!strings.Contains(r.stdout, `"keys_waiting":1`) || !strings.Contains(r.stdout, `"dead":1,`) {
		t.Errorf("stats --json after cancel = %s, want 3 ready, 1 key, 1 dead", r.stdout)
	}
	if r := jobs(t, p, "", "retry", a1); r.code != 1 || !strings.Contains(r.stderr, "it is ready") {
		t.Errorf("retry of a keyed ready job = %+v, want exit 1: it is ready", r)
	}
	if r := jobs(t, p, "", "retry", b); r.code != 0 {
		t.Fatalf("retry of the cancelled keyed job = %+v", r)
	}
	if r := jobs(t, p, "", "ls", "mail", "--json"); !strings.Contains(r.stdout, b) {
		t.Errorf("ls after retry = %s, want %s ready again under its key", r.stdout, b)
	}

	// purge: counted first, then every ready job deleted, keyed ones too.
	if r := jobs(t, p, "", "purge", "mail", "--state", "ready"); r.code != 2 ||
		!strings.Contains(r.stderr, "purge would delete 4 ready jobs of mail") {
		t.Errorf("purge without --yes = %+v, want exit 2 and the count of 4", r)
	}
	if r := jobs(t, p, "", "purge", "mail", "--state", "ready", "--yes"); r.code != 0 ||
		strings.TrimSpace(r.stdout) != "deleted 4 ready jobs of mail" {
		t.Fatalf("purge --yes = %+v, want 4 deleted", r)
	}
	if r := jobs(t, p, "", "stats", "--json"); !strings.Contains(r.stdout, `"ready":0,`) ||
		!strings.Contains(r.stdout, `"keys_waiting":0`) {
		t.Errorf("stats --json after purge = %s, want nothing ready, no key waiting", r.stdout)
	}
	if r := jobs(t, p, "", "ls", "mail", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ls after purge = %q, want []", r.stdout)
	}
	if r := jobs(t, p, "", "inspect", a1); r.code != 1 {
		t.Errorf("inspect of a purged keyed job = %+v, want exit 1 (gone)", r)
	}
}
