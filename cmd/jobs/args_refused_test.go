package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// TestHelpWordIsAnArgument: urfave/cli gives every command a "help" subcommand (alias
// "h"), so `jobs enqueue h` printed help and exited 0 without enqueuing. "h" and "help"
// are job types, IDs and queue names like any other.
func TestHelpWordIsAnArgument(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, typ := range []string{"h", "help"} {
		r := jobs(t, p, "", "enqueue", typ)
		if r.code != 0 || len(strings.TrimSpace(r.stdout)) != 26 || strings.Contains(r.stdout, "USAGE") {
			t.Fatalf("jobs enqueue %s = %+v, want exit 0 and a job ID", typ, r)
		}
		id := strings.TrimSpace(r.stdout)
		if got := jobs(t, p, "", "inspect", "--json", id).stdout; !strings.Contains(got, `"type":"`+typ+`"`) {
			t.Errorf("job of jobs enqueue %s = %s, want type %s", typ, got, typ)
		}
	}
	if r := jobs(t, p, "", "enqueue", "--id", "h", "t"); r.code != 0 {
		t.Fatalf("enqueue --id h = %+v", r)
	}
	for _, args := range [][]string{{"inspect", "h"}, {"cancel", "h"}, {"retry", "h"}} {
		r := jobs(t, p, "", args...)
		if strings.Contains(r.stdout, "USAGE") || r.code != 0 {
			t.Errorf("jobs %v = %+v, want it to act on job h", args, r)
		}
	}
	// --help after an argument shows the command's help (it said "No help topic for 't'").
	if r := jobs(t, p, "", "enqueue", "t", "--help"); r.code != 0 || !strings.Contains(r.stdout, "USAGE") {
		t.Errorf("jobs enqueue t --help = %+v, want the help of enqueue", r)
	}
	for _, args := range [][]string{{"inspect", "help"}, {"cancel", "help"}, {"ls", "h"}, {"pause", "help"}} {
		r := jobs(t, p, "", args...)
		if strings.Contains(r.stdout, "USAGE") || r.code != 1 || !strings.Contains(r.stderr, "no ") {
			t.Errorf("jobs %v = %+v, want exit 1: no such job or queue", args, r)
		}
	}
}

// TestFlagLikeArgumentRefused: an unknown flag after the arguments used to become the
// payload (`jobs enqueue rebuild --exclusiv` enqueued payload "--exclusiv", exit 0).
func TestFlagLikeArgumentRefused(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, args := range [][]string{
		{"enqueue", "rebuild", "--exclusiv"},
		{"enqueue", "rebuild", "-x"},
		{"enqueue", "rebuild", "--delay=5s", "--max-retyr=3"},
		{"cron", "add", "n", "@hourly", "t", "--queu", "low"},
		{"ls", "default", "--stat", "dead"},
	} {
		r := jobs(t, p, "", args...)
		bad := args[len(args)-1]
		if args[0] == "cron" || args[0] == "ls" {
			bad = args[len(args)-2]
		}
		if r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, bad) ||
			!strings.Contains(r.stderr, `"--"`) || r.stdout != "" {
			t.Errorf("jobs %v = %+v; want exit 2 and one line naming %s and how to pass it (after --)", args, r, bad)
		}
	}
	// What stays an argument: numbers, "-" (stdin), anything after "--".
	for _, tc := range []struct {
		args    []string
		payload string
	}{
		{[]string{"enqueue", "t", "-1"}, "-1"},
		{[]string{"enqueue", "t", "-.5"}, "-.5"},
		{[]string{"enqueue", "t", "--", "--exclusiv"}, "--exclusiv"},
		{[]string{"enqueue", "t", "--", "-x"}, "-x"},
	} {
		r := jobs(t, p, "", tc.args...)
		if r.code != 0 {
			t.Errorf("jobs %v = %+v, want exit 0", tc.args, r)
			continue
		}
		got := jobs(t, p, "", "inspect", "--json", strings.TrimSpace(r.stdout)).stdout
		if !strings.Contains(got, `"payload":"`+tc.payload+`"`) {
			t.Errorf("jobs %v stored %s, want payload %q", tc.args, got, tc.payload)
		}
	}
}

// TestIDInTwoQueuesIsAmbiguous: job IDs are unique per queue, so one ID can name a job in
// each of two queues. inspect, cancel and retry without --queue acted on the first found.
func TestIDInTwoQueuesIsAmbiguous(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, q := range []string{"qa", "qb"} {
		if r := jobs(t, p, "", "enqueue", "--queue", q, "--id", "dup", "t", q); r.code != 0 {
			t.Fatalf("enqueue on %s = %+v", q, r)
		}
	}
	for _, cmd := range []string{"inspect", "cancel", "retry"} {
		r := jobs(t, p, "", cmd, "dup")
		if r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "qa, qb") ||
			!strings.Contains(r.stderr, "--queue") || r.stdout != "" {
			t.Errorf("jobs %s dup = %+v; want exit 2 and one line naming qa, qb and --queue", cmd, r)
		}
	}
	for _, q := range []string{"qa", "qb"} {
		if got := jobs(t, p, "", "inspect", "--json", "--queue", q, "dup").stdout; !strings.Contains(got, `"state":"ready"`) ||
			!strings.Contains(got, `"payload":"`+q+`"`) {
			t.Errorf("job dup of %s = %s, want it untouched (ready, payload %s)", q, got, q)
		}
	}
	if r := jobs(t, p, "", "cancel", "--queue", "qb", "dup"); r.code != 0 {
		t.Errorf("cancel --queue qb dup = %+v", r)
	}
	if got := jobs(t, p, "", "inspect", "--json", "--queue", "qa", "dup").stdout; !strings.Contains(got, `"state":"ready"`) {
		t.Errorf("cancel --queue qb touched qa's job: %s", got)
	}
}

// TestQueueFlagBounds: weights whose sum overflowed panicked the worker (rand.N of a
// negative total), and queue names starting with '-' were taken (they read as flags
// wherever a queue is an argument). Each case runs as a child process: before the fix a
// worker panicked or ran forever.
func TestQueueFlagBounds(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	const big = "9223372036854775807"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--run", "t=true", "--queue", "a=" + big, "--queue", "b=" + big}, "from 1 to 1000"},
		{[]string{"worker", "--run", "t=true", "--queue", "a=1001"}, "from 1 to 1000"},
		{[]string{"worker", "--run", "t=true", "--queue", "-x"}, "'-'"},
		{[]string{"worker", "--run", "t=true", "--queue=-x=2"}, "'-'"},
		{[]string{"enqueue", "--queue", "-x", "t"}, "'-'"},
		{[]string{"enqueue", "--queue=--help", "t"}, "'-'"},
		{[]string{"inspect", "--queue", "--json", "ID"}, "'-'"},
	} {
		cmd, out := jobsProcess(t, p, tc.args...)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("jobs %v still running after 10s; output %q", tc.args, out)
			continue
		}
		code := cmd.ProcessState.ExitCode()
		if code != exitUsage || strings.Contains(out.String(), "panic") || !strings.Contains(out.String(), tc.want) ||
			strings.Count(out.String(), "\n") != 1 {
			t.Errorf("jobs %v = exit %d, output %q; want exit 2 and one line mentioning %s", tc.args, code, out, tc.want)
		}
	}
	if r := jobs(t, p, "", "worker", "--run", "t=true", "--queue", "a=1000", "--concurrency", "0"); r.code != exitUsage ||
		!strings.Contains(r.stderr, "concurrency") {
		t.Errorf("weight 1000 refused: %+v", r)
	}
}

// runChild runs the CLI as a child process and waits up to 10s for it to exit: commands
// that should fail at once but may instead run forever (a worker) are tested this way.
func runChild(t *testing.T, p string, args ...string) (code int, out string, exited bool) {
	t.Helper()
	cmd, buf := jobsProcess(t, p, args...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), buf.String(), true
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		return -1, buf.String(), false
	}
}

// TestRunTypeValidated: --run 'x =cmd' and --run 'a b=cmd' were accepted for types no job
// can have (Enqueue refuses spaces and control characters), and the worker's start lines
// did not say which types it handles.
func TestRunTypeValidated(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, run := range []string{"x =true", "a b=true", "a\tb=true", strings.Repeat("t", 129) + "=true"} {
		code, out, exited := runChild(t, p, "worker", "--run", run)
		if !exited || code != exitUsage || !strings.Contains(out, "job type") || strings.Count(out, "\n") != 1 {
			t.Errorf("worker --run %q = exit %d (exited %v), output %q; want exit 2 and one line about the job type",
				run, code, exited, out)
		}
	}
	_, out := watchedProcess(t, p, "worker", "--run", "b=true", "--run", "a:x=true")
	waitFor(t, 5*time.Second, "a log line naming the types a:x and b", func() bool {
		return strings.Contains(out.String(), "types=a:x,b")
	})
}

// watchedProcess starts the CLI as a child process (as jobsProcess does) whose output can
// be read while it runs.
func watchedProcess(t *testing.T, prefix string, args ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	full := append([]string{"--redis", "redis://" + redistest.Shared(t).Addr, "--prefix", prefix}, args...)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "JOBS_TEST_CHILD=jobs", "JOBS_TEST_ARGS="+strings.Join(full, "\x1f"))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, out
}
