package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
)

func TestEnqueueAfterAndInspectShowsWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	dep := strings.TrimSpace(jobs(t, p, "", "enqueue", "--queue", "mail", "charge", "{}").stdout)
	r := jobs(t, p, "", "enqueue", "ship", "{}", "--after", "mail/"+dep, "--after", "mail/gone")
	if r.code != 0 {
		t.Fatalf("enqueue --after = %+v", r)
	}
	id := strings.TrimSpace(r.stdout)
	r = jobs(t, p, "", "inspect", id)
	if r.code != 0 || !strings.Contains(r.stdout, "state       dead") ||
		!strings.Contains(r.stdout, "dependency mail/gone died") {
		t.Errorf("inspect of a job after an unknown one = %+v, want dead at once", r)
	}
	id = strings.TrimSpace(jobs(t, p, "", "enqueue", "ship", "{}", "--after", "mail/"+dep,
		"--ignore-dependency-failure").stdout)
	r = jobs(t, p, "", "inspect", id)
	if !strings.Contains(r.stdout, "state       waiting") ||
		!strings.Contains(r.stdout, "after       mail/"+dep+" (waits for it: ready)") {
		t.Errorf("inspect of a waiting job = %+v", r)
	}
	r = jobs(t, p, "", "inspect", "--json", id)
	var got struct {
		After  []string `json:"after"`
		Ignore bool     `json:"ignore_dependency_failure"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.After) != 1 || got.After[0] != "mail/"+dep || !got.Ignore {
		t.Errorf("inspect --json = %s (%v)", r.stdout, err)
	}
	if r := jobs(t, p, "", "inspect", "--queue", "mail", dep); !strings.Contains(r.stdout, "before      default/"+id+" (depends on this job; waiting)") {
		t.Errorf("inspect of the dependency = %+v, want its dependents", r)
	}
	if r := jobs(t, p, "", "ls", "default", "--state", "waiting"); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("ls --state waiting = %+v", r)
	}
}

func TestEnqueueBatchFileAndBatchInspect(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	f := filepath.Join(t.TempDir(), "rows.jsonl")
	os.WriteFile(f, []byte("{\"type\":\"row\",\"payload\":1}\n\n{\"type\":\"row\",\"payload\":2,\"queue\":\"other\"}\n"), 0o600)
	r := jobs(t, p, "", "enqueue", "--file", f, "--batch", "--queue", "reports", "--on-success", "report", "--on-death", "alert")
	if r.code != 0 {
		t.Fatalf("enqueue --file --batch = %+v", r)
	}
	bid := strings.TrimSpace(r.stdout)
	r = jobs(t, p, "", "batch", "inspect", "--json", bid)
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("batch inspect --json = %+v (%v)", r, err)
	}
	for _, k := range []string{"id", "state", "total", "pending", "done", "dead", "callbacks"} {
		if _, ok := st[k]; !ok {
			t.Errorf("batch inspect --json lacks %q: %s", k, r.stdout)
		}
	}
	if st["id"] != bid || st["state"] != "running" || st["total"] != 2.0 || st["pending"] != 2.0 {
		t.Errorf("batch inspect --json = %s", r.stdout)
	}
	if r := jobs(t, p, "", "batch", "inspect", "--queue", "reports", bid); r.code != 0 ||
		!strings.Contains(r.stdout, "on success  report (not fired)") {
		t.Errorf("batch inspect = %+v", r)
	}
}

func TestWorkflowFlagsRefuseBadUse(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{\"type\":\"row\"}\n{\"type\":\"\"}\n"), 0o600)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"enqueue", "t", "--after", "bad id"}, 2, `--after "bad id"`},
		{[]string{"enqueue", "t", "--after", "x", "--delay", "1m"}, 2, "--after and --delay exclude each other"},
		{[]string{"enqueue", "t", "--ignore-dependency-failure"}, 2, "--ignore-dependency-failure needs --after"},
		{[]string{"enqueue", "t", "--on-success", "r"}, 2, "need --file and --batch"},
		{[]string{"enqueue", "t", "--batch"}, 2, "--batch needs --file"},
		{[]string{"enqueue", "--file", bad, "--batch"}, 2, "line 2"},
		{[]string{"enqueue", "--file", bad, "--delay", "1m"}, 2, "--file takes no TYPE"},
		{[]string{"batch", "inspect", "nope"}, 1, "no batch nope in any queue"},
		{[]string{"batch", "inspect"}, 2, "one batch ID"},
	} {
		r := jobs(t, p, "", c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("jobs %v = %+v, want exit %d and one line with %q", c.args, r, c.code, c.want)
		}
	}
	// The refused batch file wrote nothing: no job ever reached the queue.
	if r := jobs(t, p, "", "ls", "default"); r.code != 1 || !strings.Contains(r.stderr, `no queue "default"`) {
		t.Errorf("after the refused batch file: %+v, want no queue default", r)
	}
}
