package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
)

// listedProcess is one object of `jobs workers --json`, every field kept raw so a test can
// check the contract's field names.
type listedProcess map[string]json.RawMessage

func (p listedProcess) str(k string) string {
	var s string
	_ = json.Unmarshal(p[k], &s)
	return s
}

func (p listedProcess) num(k string) int {
	var n int
	_ = json.Unmarshal(p[k], &n)
	return n
}

func (p listedProcess) running() []map[string]any {
	var r []map[string]any
	_ = json.Unmarshal(p["running"], &r)
	return r
}

// workersJSON runs `jobs workers --json` with base (--redis, --prefix) and returns the
// processes by PID.
func workersJSON(t *testing.T, base []string) map[int]listedProcess {
	t.Helper()
	r := runCLI("", append(slices.Clone(base), "workers", "--json")...)
	if r.code != 0 {
		t.Fatalf("jobs workers --json = %+v", r)
	}
	var out struct {
		Workers []listedProcess `json:"workers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("jobs workers --json is not {\"workers\":[...]}: %v: %q", err, r.stdout)
	}
	byPID := map[int]listedProcess{}
	for _, p := range out.Workers {
		byPID[p.num("pid")] = p
	}
	return byPID
}

// waitListed waits until cond holds for the process of pid (nil when not listed) and
// returns how long that took.
func waitListed(t *testing.T, base []string, pid int, within time.Duration, what string, cond func(listedProcess) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond(workersJSON(t, base)[pid]) {
		if time.Since(start) > within {
			t.Fatalf("after %s: %s (listed: %v)", within, what, workersJSON(t, base)[pid])
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func isListed(p listedProcess) bool  { return p != nil }
func notListed(p listedProcess) bool { return p == nil }

// Worker and scheduler processes are listed within a second of starting, with the
// --json contract's fields and the job each worker runs; a SIGKILLed worker leaves the
// list within three beats, a worker or scheduler stopped by SIGTERM within a second.
func TestWorkersListedAndGoneAfterSIGKILLOrSIGTERM(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	p := redistest.Prefix(t)
	base := []string{"--redis", "redis://" + srv.Addr, "--prefix", p}
	const beat = 300 * time.Millisecond
	start := time.Now()
	killed := startCLI(t, append(base, "worker", "--beat", beat.String(), "--queue", "reg=2", "--concurrency", "3",
		"--run", "slow=sleep 30", "--log-level", "warn")...)
	termed := startCLI(t, append(base, "worker", "--beat", beat.String(), "--run", "t=true", "--log-level", "warn")...)
	sched := startCLI(t, append(base, "scheduler", "--beat", beat.String(), "--log-level", "warn")...)
	var startup []time.Duration
	for _, c := range []*child{killed, termed, sched} {
		waitListed(t, base, c.cmd.Process.Pid, 3*time.Second, "process listed", isListed)
		startup = append(startup, time.Since(start))
	}
	// Listed within 1s of the exec. A -race binary under the whole suite's load has taken
	// over 1s just to reach main (its first beat is one round trip after), so there the
	// bound is 3s.
	bound := time.Second
	if raceEnabled {
		bound = 3 * time.Second
	}
	if slices.Max(startup) > bound {
		t.Errorf("processes listed %v after they started, want within %s", startup, bound)
	}
	all := workersJSON(t, base)
	w := all[killed.cmd.Process.Pid]
	want := []string{"id", "kind", "host", "pid", "version", "queues", "types", "concurrency", "busy", "state",
		"started_at", "beat_at", "running"}
	for _, k := range want {
		if _, ok := w[k]; !ok {
			t.Errorf("jobs workers --json object lacks %q: %v", k, w)
		}
	}
	if len(w) != len(want) {
		t.Errorf("jobs workers --json object has %d fields, want exactly %v", len(w), want)
	}
	if w.str("kind") != "worker" || string(w["queues"]) != `{"reg":2}` || string(w["types"]) != `["slow"]` ||
		w.num("concurrency") != 3 || w.str("state") != "running" {
		t.Errorf("worker entry = %v", w)
	}
	if s := all[sched.cmd.Process.Pid]; s.str("kind") != "scheduler" || s.str("state") != "running" {
		t.Errorf("scheduler entry = %v", s)
	}
	id := strings.TrimSpace(runCLI("", append(base, "enqueue", "--queue", "reg", "slow")...).stdout)
	waitListed(t, base, killed.cmd.Process.Pid, 5*time.Second, "the slow job listed as running", func(p listedProcess) bool {
		r := p.running()
		return len(r) == 1 && r[0]["id"] == id && r[0]["queue"] == "reg" && r[0]["type"] == "slow" && r[0]["started_at"] != nil
	})
	if r := runCLI("", append(base, "workers")...); r.code != 0 || !strings.Contains(r.stdout, id) ||
		!strings.Contains(r.stdout, "reg=2") || !strings.Contains(r.stdout, "scheduler") {
		t.Errorf("jobs workers = %+v, want the processes and the running job", r)
	}

	// The entry's expiry is timed on Redis (a 10 ms poll of its key), not through
	// `jobs workers`, whose every run is a process start: on a loaded machine one took
	// 250 ms more than the bound allows. The CLI's listing is checked after.
	entry := proto.RegistryKeysOf(p).Process + w.str("id")
	rdb := srv.Client(t)
	killed.kill()
	killedAt := time.Now()
	for rdb.Exists(context.Background(), entry).Val() == 1 && time.Since(killedAt) < 3*beat+time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	gone := time.Since(killedAt)
	if gone > 3*beat+100*time.Millisecond {
		t.Errorf("SIGKILLed worker's entry there %s after the kill, want gone within 3 beats (%s)", gone, 3*beat)
	}
	waitListed(t, base, killed.cmd.Process.Pid, time.Second, "SIGKILLed worker gone from jobs workers", notListed)
	// Measured to the entry's removal, not to the process's exit: a test binary built
	// with -race sleeps 1s in exit (GORACE atexit_sleep_ms).
	sigterm := func(c *child) time.Duration {
		t.Helper()
		c.cmd.Process.Signal(syscall.SIGTERM)
		gone := waitListed(t, base, c.cmd.Process.Pid, time.Second, "SIGTERMed process gone within 1s", notListed)
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, c.out)
		}
		return gone
	}
	workerGone, schedGone := sigterm(termed), sigterm(sched)
	t.Logf("FIGURES registry processes (beat %s): listed %v after start; SIGKILLed worker gone %s after the kill "+
		"(bound 3 beats = %s); SIGTERMed worker gone %s, scheduler %s after the signal",
		beat, startup, gone.Round(time.Millisecond), 3*beat, workerGone.Round(time.Millisecond), schedGone.Round(time.Millisecond))
}

// `jobs workers quiet ID` makes a worker process claim nothing more within one beat while
// its running job finishes; `jobs workers stop ID` makes it exit 0 within one beat.
func TestWorkersQuietAndStopCommands(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	p := redistest.Prefix(t)
	base := []string{"--redis", "redis://" + srv.Addr, "--prefix", p}
	const beat = 300 * time.Millisecond
	w := startCLI(t, append(base, "worker", "--beat", beat.String(), "--lease", "1s", "--run", "slow=sleep 2",
		"--log-level", "info")...)
	pid := w.cmd.Process.Pid
	waitListed(t, base, pid, 3*time.Second, "worker listed", isListed)
	wid := workersJSON(t, base)[pid].str("id")
	first := strings.TrimSpace(runCLI("", append(base, "enqueue", "slow")...).stdout)
	waitListed(t, base, pid, 5*time.Second, "slow job running", func(p listedProcess) bool { return len(p.running()) == 1 })

	if r := runCLI("", append(base, "workers", "quiet", wid)...); r.code != 0 || r.stderr != "" ||
		r.stdout != "told "+wid+" to be quiet: it claims no more jobs from its next beat and finishes its running ones\n" {
		t.Fatalf("jobs workers quiet = %+v", r)
	}
	quietIn := waitListed(t, base, pid, beat+500*time.Millisecond, "quiet within one beat", func(p listedProcess) bool {
		return p.str("state") == "quiet"
	})
	second := strings.TrimSpace(runCLI("", append(base, "enqueue", "slow")...).stdout)
	// The first job (2s, twice its 1s lease) ends done only if the quiet worker renewed it.
	waitFor(t, 10*time.Second, "the running job done", func() bool {
		return strings.Contains(runCLI("", append(base, "inspect", "--json", first)...).stdout, `"state":"done"`)
	})
	if r := runCLI("", append(base, "inspect", "--json", second)...); !strings.Contains(r.stdout, `"state":"ready"`) {
		t.Errorf("job enqueued after quiet = %s, want ready: a quiet worker claims nothing", r.stdout)
	}

	ordered := time.Now()
	if r := runCLI("", append(base, "workers", "stop", wid)...); r.code != 0 || r.stdout != "told "+wid+" to stop: it shuts down gracefully from its next beat\n" {
		t.Fatalf("jobs workers stop = %+v", r)
	}
	// It shuts down and leaves the list at its next beat. (Its exit comes 1s later in
	// this test: a binary built with -race sleeps 1s in exit, GORACE atexit_sleep_ms.)
	stopIn := waitListed(t, base, pid, beat+time.Second, "worker gone after jobs workers stop", notListed)
	if stopIn > beat+200*time.Millisecond {
		t.Errorf("worker left the list %s after jobs workers stop, want within a beat (%s)", stopIn, beat)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("worker exit after jobs workers stop: %v\n%s", err, w.out)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("worker still running %s after jobs workers stop\n%s", time.Since(ordered), w.out)
	}
	for _, line := range []string{"quiet ordered by an operator", "stop ordered by an operator"} {
		if !strings.Contains(w.out.String(), line) {
			t.Errorf("worker log lacks %q:\n%s", line, w.out)
		}
	}
	t.Logf("FIGURES quiet/stop (beat %s): quiet shown %s after the command, stopped and gone from the list %s after jobs workers stop",
		beat, quietIn.Round(time.Millisecond), stopIn.Round(time.Millisecond))
}

// Redis restarted without persistence has lost the registry: each process is listed
// again at its next beat.
func TestWorkersListedAgainAfterRedisRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a redis-server")
	}
	t.Parallel()
	srv := redistest.Own(t)
	base := []string{"--redis", "redis://" + srv.Addr, "--prefix", "jobs"}
	const beat = 500 * time.Millisecond
	w := startCLI(t, append(base, "worker", "--beat", beat.String(), "--run", "t=true", "--log-level", "warn")...)
	s := startCLI(t, append(base, "scheduler", "--beat", beat.String(), "--log-level", "warn")...)
	for _, c := range []*child{w, s} {
		waitListed(t, base, c.cmd.Process.Pid, 3*time.Second, "listed before the restart", isListed)
	}
	started := workersJSON(t, base)[w.cmd.Process.Pid].str("started_at")
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	var back []time.Duration
	for _, c := range []*child{w, s} {
		// A listing that a slow `jobs workers` (a loaded machine) finds late proves nothing;
		// a look that began after the deadline and found the process missing does.
		var missed time.Time // the start of the last look that did not find it
		for {
			look := time.Now()
			if workersJSON(t, base)[c.cmd.Process.Pid] != nil {
				break
			}
			missed = look
			if time.Since(restarted) > beat+5*time.Second {
				t.Fatalf("pid %d not listed again %v after Redis came back", c.cmd.Process.Pid, time.Since(restarted))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if late := missed.Sub(restarted); late > beat+200*time.Millisecond {
			t.Errorf("pid %d still not listed %v after Redis came back, want within one beat (%s)", c.cmd.Process.Pid, late, beat)
		}
		back = append(back, time.Since(restarted))
	}
	if again := workersJSON(t, base)[w.cmd.Process.Pid].str("started_at"); again != started {
		t.Errorf("started_at after the restart = %s, want the process's start %s", again, started)
	}
	for _, c := range []*child{w, s} {
		if err := c.stop(); err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, c.out)
		}
	}
	t.Logf("FIGURES registry after a Redis restart without persistence (beat %s): worker, scheduler found listed again %v after it answered",
		beat, back)
}

// Bad input: one line on stderr, exit 1 for an unknown process, 2 for bad usage.
func TestWorkersBadInput(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"workers", "quiet", "nobody:1:x"}, 1, "no live worker or scheduler nobody:1:x"},
		{[]string{"workers", "stop", "nobody:1:x"}, 1, "no live worker or scheduler nobody:1:x"},
		{[]string{"workers", "quiet"}, 2, "one process ID"},
		{[]string{"workers", "stop"}, 2, "one process ID"},
		{[]string{"workers", "stop", "a", "b"}, 2, "one process ID"},
		{[]string{"workers", "quiet", ""}, 2, "process ID is empty"},
		{[]string{"workers", "bogus"}, 2, "no arguments"},
		{[]string{"worker", "--beat", "10ms", "--run", "t=true"}, 2, "--beat"},
		{[]string{"scheduler", "--beat", "0s"}, 2, "--beat"},
	} {
		r := jobs(t, p, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("jobs %q = exit %d, stderr %q; want exit %d and one line mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if r := jobs(t, p, "", "workers"); r.code != 0 || !strings.Contains(r.stdout, "no live workers") {
		t.Errorf("jobs workers with none = %+v", r)
	}
	if r := jobs(t, p, "", "workers", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != `{"workers":[]}` {
		t.Errorf("jobs workers --json with none = %+v, want {\"workers\":[]}", r)
	}
}

// jobs stats --json gains each queue's live workers and latency.
func TestStatsShowsWorkersAndLatency(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	p := redistest.Prefix(t)
	base := []string{"--redis", "redis://" + srv.Addr, "--prefix", p}
	w := startCLI(t, append(base, "worker", "--queue", "busyq", "--run", "t=true", "--log-level", "warn")...)
	waitListed(t, base, w.cmd.Process.Pid, 3*time.Second, "worker listed", isListed)
	runCLI("", append(base, "enqueue", "--queue", "idleq", "t")...)
	runCLI("", append(base, "enqueue", "--queue", "busyq", "t")...)
	waitFor(t, 5*time.Second, "stats show busyq's worker and idleq's latency", func() bool {
		r := runCLI("", append(base, "stats", "--json")...)
		var out struct {
			Queues []struct {
				Name      string `json:"name"`
				Workers   *int   `json:"workers"`
				LatencyMS *int64 `json:"latency_ms"`
			} `json:"queues"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("jobs stats --json = %q: %v", r.stdout, err)
		}
		ok := 0
		for _, q := range out.Queues {
			if q.Workers == nil || q.LatencyMS == nil {
				t.Fatalf("jobs stats --json queue %s lacks workers or latency_ms: %s", q.Name, r.stdout)
			}
			switch {
			case q.Name == "idleq" && *q.Workers == 0 && *q.LatencyMS > 0,
				q.Name == "busyq" && *q.Workers == 1:
				ok++
			}
		}
		return ok == 2
	})
	if r := runCLI("", append(base, "stats")...); !strings.Contains(r.stdout, "WORKERS") || !strings.Contains(r.stdout, "LATENCY") {
		t.Errorf("jobs stats = %q, want WORKERS and LATENCY columns", r.stdout)
	}
	if err := w.stop(); err != nil {
		t.Errorf("worker exit: %v", err)
	}
}
