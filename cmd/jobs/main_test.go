package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// TestMain doubles as the entry point of child processes: fault tests re-run this test
// binary as a worker process (JOBS_TEST_CHILD) so they can SIGKILL real processes.
func TestMain(m *testing.M) {
	redis.SetLogger(discardLogger{})
	switch os.Getenv("JOBS_TEST_CHILD") {
	case "jobs":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		code := run(ctx, append([]string{"jobs"}, strings.Split(os.Getenv("JOBS_TEST_ARGS"), "\x1f")...), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	case "counting-worker":
		os.Exit(countingWorker())
	case "enqueuer":
		os.Exit(enqueuer())
	}
	redistest.Main(m)
}

type result struct {
	stdout, stderr string
	code           int
}

// cliMu serialises in-process runs: urfave/cli/v2 mutates package-level flags (HelpFlag)
// while parsing, so two apps may not parse at once in one process. The binary runs one.
var cliMu sync.Mutex

// runCLI runs the CLI in-process with args (after "jobs").
func runCLI(stdin string, args ...string) result {
	cliMu.Lock()
	defer cliMu.Unlock()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"jobs"}, args...), strings.NewReader(stdin), &out, &errb)
	return result{out.String(), errb.String(), code}
}

// jobs runs the CLI in-process against the test Redis, with the test's own key prefix.
func jobs(t *testing.T, prefix string, stdin string, args ...string) result {
	t.Helper()
	return runCLI(stdin, append([]string{"--redis", "redis://" + redistest.Shared(t).Addr, "--prefix", prefix}, args...)...)
}

func TestEnqueueAndInspect(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	r := jobs(t, p, "", "enqueue", "--queue", "mail", "--max-retry", "4", "email", `{"to":"ann"}`)
	if r.code != 0 || len(strings.TrimSpace(r.stdout)) != 26 || r.stderr != "" {
		t.Fatalf("enqueue = %+v, want exit 0 and an ID alone on stdout", r)
	}
	id := strings.TrimSpace(r.stdout)
	r = jobs(t, p, "", "inspect", "--json", id)
	if r.code != 0 {
		t.Fatalf("inspect = %+v", r)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("inspect --json is not JSON: %v: %q", err, r.stdout)
	}
	for _, k := range []string{"id", "type", "queue", "state", "attempt", "max_retry", "payload",
		"created_at", "run_at", "started_at", "finished_at", "last_error", "result", "postponed",
		"progress", "progress_msg", "progress_at"} {
		if _, ok := got[k]; !ok {
			t.Errorf("inspect --json lacks %q", k)
		}
	}
	if got["id"] != id || got["queue"] != "mail" || got["state"] != "ready" || got["attempt"] != 0.0 ||
		got["max_retry"] != 4.0 || got["payload"] != `{"to":"ann"}` || got["run_at"] != nil {
		t.Errorf("inspect --json = %s", r.stdout)
	}
	r = jobs(t, p, "", "inspect", id)
	if r.code != 0 || !strings.Contains(r.stdout, "state       ready") {
		t.Errorf("inspect = %+v", r)
	}
	// QUEUE/ID, the form --after, JOB_AFTER and JOB_DEPENDENCIES name jobs in.
	r = jobs(t, p, "", "inspect", "--json", "mail/"+id)
	if r.code != 0 || !strings.Contains(r.stdout, `"id":"`+id+`"`) {
		t.Errorf("inspect mail/ID = %+v", r)
	}
	r = jobs(t, p, "", "inspect", "other/"+id)
	if r.code == 0 || !strings.Contains(r.stderr, "no job other/"+id) {
		t.Errorf("inspect other/ID = %+v, want no such job", r)
	}
	r = jobs(t, p, "", "cancel", "mail/"+id)
	if r.code != 0 || !strings.Contains(r.stdout, id+" cancelled") {
		t.Errorf("cancel mail/ID = %+v", r)
	}
	r = jobs(t, p, "", "retry", "mail/"+id)
	if r.code != 0 || !strings.Contains(r.stdout, id+" is ready") {
		t.Errorf("retry mail/ID = %+v", r)
	}
}

func TestEnqueueFromStdinDelayedAndAt(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	r := jobs(t, p, "payload from stdin", "enqueue", "--delay", "1h", "t", "-")
	id := strings.TrimSpace(r.stdout)
	r = jobs(t, p, "", "inspect", "--json", id)
	var got map[string]any
	json.Unmarshal([]byte(r.stdout), &got)
	if got["payload"] != "payload from stdin" || got["state"] != "scheduled" {
		t.Errorf("inspect = %s", r.stdout)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	r = jobs(t, p, "", "enqueue", "--at", at.Format(time.RFC3339), "t")
	r = jobs(t, p, "", "inspect", "--json", strings.TrimSpace(r.stdout))
	json.Unmarshal([]byte(r.stdout), &got)
	if got["run_at"] != at.Format(time.RFC3339) || got["state"] != "scheduled" {
		t.Errorf("--at: run_at %v state %v, want %s scheduled", got["run_at"], got["state"], at.Format(time.RFC3339))
	}
}

func TestEnqueueDuplicateIDExits3(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	if r := jobs(t, p, "", "enqueue", "--id", "order-42", "charge"); r.code != 0 {
		t.Fatalf("first enqueue = %+v", r)
	}
	r := jobs(t, p, "", "enqueue", "--id", "order-42", "charge")
	if r.code != 3 || r.stdout != "order-42\n" || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("duplicate enqueue = %+v, want exit 3, the ID on stdout, a message on stderr", r)
	}
}

func TestEnqueueUniqueExits3WithFirstID(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	first := jobs(t, p, "", "enqueue", "--unique-for", "1h", "digest", `{"user":7}`)
	if first.code != 0 {
		t.Fatalf("first = %+v", first)
	}
	r := jobs(t, p, "", "enqueue", "--unique-for", "1h", "digest", `{"user":7}`)
	if r.code != 3 || r.stdout != first.stdout || !strings.Contains(r.stderr, "duplicate") {
		t.Errorf("second = %+v, want exit 3 and the first ID %q", r, first.stdout)
	}
	r = jobs(t, p, "", "enqueue", "--exclusive-key", "reports", "report")
	if r.code != 0 || !strings.Contains(jobs(t, p, "", "inspect", "--json", strings.TrimSpace(r.stdout)).stdout, `"exclusive":"reports"`) {
		t.Errorf("--exclusive-key not stored: %+v", r)
	}
}

func TestBadUsage(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"enqueue"}, 2, "TYPE"},
		{[]string{"enqueue", "a", "b", "c"}, 2, "TYPE"},
		{[]string{"enqueue", "--at", "tomorrow", "t"}, 2, "RFC 3339"},
		{[]string{"enqueue", "--delay", "soon", "t"}, 2, "delay"},
		{[]string{"enqueue", "--max-retry", "-1", "t"}, 2, "max retry"},
		{[]string{"enqueue", "--timeout", "0s", "t"}, 2, "timeout"},
		{[]string{"enqueue", "--queue", "a b", "t"}, 2, "queue name"},
		{[]string{"enqueue", "has space"}, 2, "job type"},
		{[]string{"enqueue", "--delay", "1s", "--at", "2030-01-01T00:00:00Z", "t"}, 2, "--delay and --at exclude each other"},
		{[]string{"nosuch"}, 2, "unknown command"},
		{[]string{"enqueue", "--unique-key", "k", "t"}, 2, "--unique-key needs --unique-for"},
		{[]string{"enqueue", "--unique-for", "-1s", "t"}, 2, "unique ttl"},
		{[]string{"inspect"}, 2, "one job ID"},
		{[]string{"inspect", "NOPE"}, 1, "no job NOPE"},
		{[]string{"inspect", ""}, 2, "job ID is empty"},
		{[]string{"retry", ""}, 2, "job ID is empty"},
		{[]string{"cancel", ""}, 2, "job ID is empty"},
		{[]string{"cron", "add", "x", "@every 0s", "t"}, 2, "whole seconds"},
		{[]string{"scheduler", "--cron", "x '@every 500ms' t"}, 2, "whole seconds"},
		{[]string{"worker"}, 2, "--run"},
		{[]string{"worker", "--run", "noequals"}, 2, "TYPE=COMMAND"},
		{[]string{"worker", "--run", "t=sh -c 'open"}, 2, "unterminated"},
		{[]string{"worker", "--run", "t=a", "--run", "t=b"}, 2, "twice"},
		{[]string{"worker", "--run", "t=a", "--queue", "q=0"}, 2, "weight"},
		{[]string{"worker", "--run", "t=a", "--log-level", "loud"}, 2, "log-level"},
		{[]string{"worker", "--run", "t=a", "--concurrency", "0"}, 2, "concurrency"},
		{[]string{"worker", "--run", "t=a", "--abandon-grace", "0s"}, 2, "abandon-grace"},
		{[]string{"worker", "--run", "t=a", "--dead-max", "0"}, 2, "dead-max"},
		{[]string{"bench", "--mode", "nope"}, 2, "mode"},
		{[]string{"bench", "--n", "0"}, 2, "N"},
		{[]string{"bench", "--limit-rate", "fast"}, 2, "--limit-rate"},
		{[]string{"bench", "--limit-key-rate", "10/fortnight"}, 2, "--limit-key-rate"},
		{[]string{"bench", "--limit-keys", "-1"}, 2, "--limit-keys"},
		{[]string{"bench", "--queues", "0"}, 2, "--queues must be from 1 to 10000, got 0"},
		{[]string{"bench", "--queues", "10001"}, 2, "--queues must be from 1 to 10000, got 10001"},
		{[]string{"bench", "--backlog", "-1"}, 2, "backlog -1 is negative"},
		{[]string{"bench", "--mode", "fanout", "--queues", "2"}, 2, "fanout runs on two queues of its own"},
		{[]string{"bench", "--mode", "fanout", "--backlog", "5"}, 2, "fanout runs on two queues of its own"},
		{[]string{"--prefix", "a{b}", "enqueue", "t"}, 2, "prefix"},
		{[]string{"--redis", "http://x", "enqueue", "t"}, 2, "--redis"},
		{[]string{"--redis", "redis://127.0.0.1:1/0?pool_size=2000000000", "stats"}, 2, "pool_size=2000000000: want 0 to 10000"},
	}
	for _, tc := range cases {
		r := jobs(t, p, "", tc.args...)
		if tc.args[0] == "--prefix" || tc.args[0] == "--redis" {
			r = runCLI("", tc.args...)
		}
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("jobs %v = exit %d, stderr %q; want exit %d and one line mentioning %q",
				tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

func TestUnreachableRedisFailsFast(t *testing.T) {
	t.Parallel()
	l, _ := redistest.Start() // a port that was just free: nothing listens after Stop
	addr := l.Addr
	l.Stop()
	start := time.Now()
	r := runCLI("", "--redis", "redis://user:hunter2@"+addr, "enqueue", "t")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach Redis") ||
		strings.Count(r.stderr, "\n") != 1 || time.Since(start) > 5*time.Second {
		t.Errorf("exit %d after %s, stderr %q; want exit 1 within 5s, one line", r.code, time.Since(start), r.stderr)
	}
	if strings.Contains(r.stderr, "hunter2") {
		t.Errorf("password leaked: %q", r.stderr)
	}
}

// jobsProcess starts the CLI as a child process (this test binary in JOBS_TEST_CHILD mode).
func jobsProcess(t *testing.T, prefix string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return jobsProcessArgs(t, append([]string{"--redis", "redis://" + redistest.Shared(t).Addr, "--prefix", prefix}, args...)...)
}

// jobsProcessArgs starts the CLI as a child process with exactly these arguments.
func jobsProcessArgs(t *testing.T, full ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "JOBS_TEST_CHILD=jobs", "JOBS_TEST_ARGS="+strings.Join(full, "\x1f"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &out
}

func TestWorkerRunsJobsAndStopsCleanlyOnSIGTERM(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	cmd, out := jobsProcess(t, p, "worker", "--shutdown-timeout", "10s",
		"--run", "slow=sleep 1", "--run", "upper=tr a-z A-Z")
	id := strings.TrimSpace(jobs(t, p, "", "enqueue", "upper", "hello").stdout)
	waitFor(t, 5*time.Second, "upper job done", func() bool {
		return strings.Contains(jobs(t, p, "", "inspect", "--json", id).stdout, `"result":"HELLO"`)
	})
	slow := strings.TrimSpace(jobs(t, p, "", "enqueue", "slow").stdout)
	waitFor(t, 5*time.Second, "slow job active", func() bool {
		return strings.Contains(jobs(t, p, "", "inspect", "--json", slow).stdout, `"state":"active"`)
	})
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if err != nil {
		t.Fatalf("worker exit after SIGTERM: %v; output:\n%s", err, out)
	}
	if r := jobs(t, p, "", "inspect", "--json", slow); !strings.Contains(r.stdout, `"state":"done"`) {
		t.Errorf("in-flight job after SIGTERM: %s, want done", r.stdout)
	}
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEveryCommandReportsARefusedRedis runs each command that needs Redis against a port
// nothing listens on: one line, exit 1, within seconds.
func TestEveryCommandReportsARefusedRedis(t *testing.T) {
	t.Parallel()
	srv, _ := redistest.Start()
	url := "redis://" + srv.Addr
	srv.Stop()
	for _, args := range [][]string{
		{"enqueue", "t"}, {"enqueue", "--file", "-"}, {"inspect", "X"}, {"ls", "q"}, {"stats"},
		{"retry", "X"}, {"cancel", "X"}, {"pause", "q"}, {"resume", "q"}, {"purge", "q", "--state", "dead"},
		{"worker", "--run", "t=true"}, {"scheduler"}, {"cron", "ls"}, {"cron", "rm", "x"},
		{"cron", "add", "x", "@hourly", "t"}, {"doctor"}, {"bench", "--n", "1"}, {"tail", "q"},
		{"workers"}, {"workers", "quiet", "x"}, {"workers", "stop", "x"}, {"dash", "--listen", "127.0.0.1:0"},
	} {
		start := time.Now()
		r := runCLI("", append([]string{"--redis", url}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "cannot reach Redis") || strings.Count(r.stderr, "\n") != 1 ||
			time.Since(start) > 5*time.Second {
			t.Errorf("jobs %v on a refused Redis = exit %d after %s, stderr %q", args, r.code, time.Since(start), r.stderr)
		}
	}
}
