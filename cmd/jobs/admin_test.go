package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

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

// `stats --watch` rides out a Redis restart: one line per failed refresh, then figures
// again, never an exit.
func TestStatsWatchSurvivesRedisRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Own(t)
	p := redistest.Prefix(t)
	base := []string{"--redis", "redis://" + srv.Addr, "--prefix", p}
	if r := runCLI("", append(base, "enqueue", "t")...); r.code != 0 {
		t.Fatalf("enqueue = %+v", r)
	}
	cmd, out := jobsProcessArgs(t, append(base, "stats", "--watch", "--json")...)
	exitedCh := make(chan struct{})
	go func() { cmd.Wait(); close(exitedCh) }()
	time.Sleep(1500 * time.Millisecond)
	srv.Kill()
	time.Sleep(1500 * time.Millisecond)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if r := runCLI("", append(base, "enqueue", "t")...); r.code != 0 { // no persistence: the queue starts again
		t.Fatalf("enqueue after restart = %+v", r)
	}
	time.Sleep(2500 * time.Millisecond)
	var exited bool
	select {
	case <-exitedCh:
		exited = true
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-exitedCh
	if exited {
		t.Fatalf("stats --watch exited during the outage:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var retried bool
	for _, l := range lines {
		retried = retried || strings.Contains(l, "(retrying)")
	}
	if !retried || !strings.HasPrefix(lines[len(lines)-1], `{"queues":[{`) {
		t.Errorf("stats --watch across a restart printed:\n%s\nwant a retry line, then figures again", out)
	}
}

// jobs retry keeps a job's guarantees: a job cancelled while it waited waits again (and
// dies again, exit 1, when a dependency of it is gone), and a dead unique job whose key another job holds now is refused, exit 1, naming the holder.
func TestRetryKeepsDependenciesAndUniqueness(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	id := func(r result) string { return strings.TrimSpace(r.stdout) }
	parent := id(jobs(t, p, "", "enqueue", "--delay", "1h", "p"))
	child := id(jobs(t, p, "", "enqueue", "--after", parent, "c"))
	jobs(t, p, "", "cancel", child)
	if r := jobs(t, p, "", "retry", child); r.code != 0 || !strings.Contains(r.stdout, "waits for its dependencies") {
		t.Errorf("retry of a job cancelled while waiting = %+v, want it waiting again", r)
	}
	gone := id(jobs(t, p, "", "enqueue", "--queue", "g", "--delay", "1h", "p"))
	orphan := id(jobs(t, p, "", "enqueue", "--after", "g/"+gone, "c"))
	jobs(t, p, "", "cancel", orphan)
	jobs(t, p, "", "purge", "g", "--state", "scheduled", "--yes")
	if r := jobs(t, p, "", "retry", orphan); r.code != 1 ||
		!strings.Contains(r.stderr, "died again at once: dependency g/"+gone+" died") {
		t.Errorf("retry of a job whose dependency is gone = %+v, want exit 1: it died again", r)
	}
	first := id(jobs(t, p, "", "enqueue", "--unique-for", "1h", "--unique-key", "k", "u"))
	jobs(t, p, "", "cancel", first)
	second := id(jobs(t, p, "", "enqueue", "--unique-for", "1h", "--unique-key", "k", "u"))
	if r := jobs(t, p, "", "retry", first); r.code != 1 || !strings.Contains(r.stderr, "held by job "+second) {
		t.Errorf("retry of a dead unique job whose key %s holds = %+v, want exit 1 naming it", second, r)
	}
}
