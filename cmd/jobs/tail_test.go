package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// tailLine is one line of `jobs tail --json`.
type tailLine struct {
	Queue, Event, ID, Type, Worker, Error, Cursor string
	Attempt                                       int
	At                                            time.Time
}

// startJobs runs the CLI as a child process with exactly these arguments; its output is
// read while it runs, through a lockedBuffer.
func startJobs(t *testing.T, args ...string) (*exec.Cmd, *lockedBuffer, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "JOBS_TEST_CHILD=jobs", "JOBS_TEST_ARGS="+strings.Join(args, "\x1f"))
	var out, errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &out, &errb
}

// tailLines waits until out holds n complete JSON lines and returns them.
func tailLines(t *testing.T, out *lockedBuffer, n int) []tailLine {
	t.Helper()
	var lines []tailLine
	waitFor(t, 10*time.Second, fmt.Sprintf("%d lines of jobs tail --json", n), func() bool {
		text := out.String()
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i]
		} else {
			text = ""
		}
		lines = lines[:0]
		for _, l := range strings.Split(text, "\n") {
			if l == "" {
				continue
			}
			var tl tailLine
			if err := json.Unmarshal([]byte(l), &tl); err != nil {
				t.Fatalf("jobs tail --json line %q: %v", l, err)
			}
			lines = append(lines, tl)
		}
		return len(lines) >= n
	})
	return lines
}

func tailClient(t *testing.T, prefix string, events int) *queue.Client {
	t.Helper()
	c, err := queue.NewClient(redistest.Client(t), queue.Config{Prefix: prefix, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func enqueueN(t *testing.T, c *queue.Client, n int) []string {
	t.Helper()
	batch := make([]queue.BatchJob, n)
	for i := range batch {
		batch[i] = queue.BatchJob{Type: "t"}
	}
	res, err := c.EnqueueBatch(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// `jobs tail` SIGKILLed and started again from the cursor of the last line it printed
// loses nothing the stream still holds; started from a cursor the stream has trimmed
// past, it exits 1 with one line naming the gap, instead of skipping events.
func TestTailKilledAndResumedFromCursor(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	base := []string{"--redis", "redis://" + redistest.Shared(t).Addr, "--prefix", p}
	c := tailClient(t, p, 50)
	first := enqueueN(t, c, 5)

	// The 5 jobs are one stream entry: the tail is killed inside it, after the third line,
	// whose cursor says so (ID/3).
	tail, out, _ := startJobs(t, append(slices.Clone(base), "tail", "--json", "--since", "0", "default")...)
	lines := tailLines(t, out, 5)
	tail.Process.Kill()
	tail.Wait()
	if !strings.HasSuffix(lines[2].Cursor, "/3") || strings.Contains(lines[4].Cursor, "/") {
		t.Errorf("cursors %q, %q: want ID/3 inside the batch's entry, ID after its last event", lines[2].Cursor, lines[4].Cursor)
	}
	more := enqueueN(t, c, 5) // while no tail runs

	_, out, _ = startJobs(t, append(slices.Clone(base), "tail", "--json", "--since", lines[2].Cursor, "default")...)
	resumed := tailLines(t, out, 7)
	var got []string
	for _, l := range append(lines[:3], resumed...) {
		if l.Event != "enqueued" || l.Queue != "default" || l.Type != "t" || l.At.IsZero() {
			t.Errorf("line %+v, want an enqueued event of type t with its time", l)
		}
		got = append(got, l.ID)
	}
	if want := append(first, more...); !slices.Equal(got, want) {
		t.Errorf("killed and resumed tail printed %v, want %v: nothing lost, nothing twice", got, want)
	}

	// 300 entries (one job per call), far past the ~50 (nodes of 100) the stream keeps.
	for range 300 {
		if _, err := c.Enqueue(context.Background(), "t", nil); err != nil {
			t.Fatal(err)
		}
	}
	r := runCLI("", append(slices.Clone(base), "tail", "--json", "--since", resumed[6].Cursor, "default")...)
	if r.code != 1 || !strings.Contains(r.stderr, "events lost") || !strings.Contains(r.stderr, resumed[6].Cursor) ||
		strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
		t.Errorf("tail from a trimmed cursor = %+v, want exit 1, one line naming the gap and the cursor", r)
	}
}

// Human output is one line per event with the job's error escaped as ls escapes it; and
// `jobs inspect` shows the attempt history, --json as "attempts".
func TestTailHumanOutputAndInspectAttempts(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	base := []string{"--redis", "redis://" + redistest.Shared(t).Addr, "--prefix", p}
	c := tailClient(t, p, 0)
	id, _ := c.Enqueue(context.Background(), "mail", nil)
	b := broker.Of(c)
	jobs, err := b.Claim(context.Background(), "default", 1, time.Minute, "w1")
	if err != nil || len(jobs) != 1 {
		t.Fatal(jobs, err)
	}
	if _, err := b.Fail(context.Background(), jobs[0], "bad \x1b[2J thing", 0); err != nil {
		t.Fatal(err)
	}
	_, out, _ := startJobs(t, append(slices.Clone(base), "tail", "--since", "0", "--type", "mail")...)
	waitFor(t, 10*time.Second, "retry line", func() bool { return strings.Contains(out.String(), " retry ") })
	text := out.String()
	if strings.Contains(text, "\x1b") || !strings.Contains(text, `bad \x1b[2J thing`) {
		t.Errorf("tail printed %q, want the escape byte shown as \\x1b", text)
	}
	if n := strings.Count(text, "\n"); n != 3 {
		t.Errorf("tail printed %d lines, want 3 (enqueued, started, retry):\n%s", n, text)
	}
	if !strings.Contains(text, "  default  started      "+id+"  mail  attempt 1  worker w1") {
		t.Errorf("tail line for started: %q", text)
	}

	// --since a duration: the events of that last hour, as JSON.
	_, jout, _ := startJobs(t, append(slices.Clone(base), "tail", "--json", "--since", "1h", "default")...)
	if l := tailLines(t, jout, 3); l[0].Event != "enqueued" || l[2].Event != "retry" || l[2].Error != "bad \x1b[2J thing" {
		t.Errorf("tail --since 1h --json = %+v, want enqueued, started, retry", l)
	}

	r := runCLI("", append(slices.Clone(base), "inspect", "--json", id)...)
	var j struct {
		Attempts []struct {
			Attempt int    `json:"attempt"`
			Outcome string `json:"outcome"`
			Worker  string `json:"worker"`
			Error   string `json:"error"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || len(j.Attempts) != 1 ||
		j.Attempts[0].Outcome != "retry" || j.Attempts[0].Worker != "w1" || j.Attempts[0].Error != "bad \x1b[2J thing" {
		t.Errorf("inspect --json = %s (%v), want attempts [{1 retry w1 error}]", r.stdout, err)
	}
	r = runCLI("", append(slices.Clone(base), "inspect", id)...)
	if !strings.Contains(r.stdout, "attempt 1") || !strings.Contains(r.stdout, `retry`) || strings.Contains(r.stdout, "\x1b") {
		t.Errorf("inspect = %q, want an escaped 'attempt 1  retry ...' line", r.stdout)
	}
}

// Bad input is one line on stderr and exit 2, before Redis is reached.
func TestTailBadInput(t *testing.T) {
	t.Parallel()
	base := []string{"--redis", "redis://127.0.0.1:1"}
	for _, args := range [][]string{
		{"tail", "--since", "yesterday"},
		{"tail", "--since", "-5m"},
		{"tail", "--since", "a=1,b"},
		{"tail", "bad queue!"},
		{"tail", "--", "-x"},
		{"--events", "-1", "stats"},
	} {
		r := runCLI("", append(slices.Clone(base), args...)...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("jobs %v = %+v, want exit 2 and one line on stderr", args, r)
		}
	}
}

// `jobs tail` follows queues that live on three different masters of a Redis Cluster,
// one blocking reader per node, and each line's cursor holds all three positions.
func TestTailAcrossClusterMasters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	t.Parallel()
	cl, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	p := redistest.Prefix(t)
	rdb := cl.Client(t)
	var qs []string
	seen := map[string]bool{}
	for i := 0; len(qs) < 3; i++ {
		q := fmt.Sprintf("q%d", i)
		node, err := rdb.MasterForKey(context.Background(), p+":{"+q+"}:events")
		if err != nil {
			t.Fatal(err)
		}
		if !seen[node.Options().Addr] {
			seen[node.Options().Addr] = true
			qs = append(qs, q)
		}
	}
	base := []string{"--cluster", "--redis", cl.URL(), "--prefix", p}
	c, err := queue.NewClient(rdb, queue.Config{Prefix: p})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	enqueue := func() {
		for _, q := range qs {
			id, err := c.Enqueue(context.Background(), "t", nil, queue.On(q))
			if err != nil {
				t.Fatal(err)
			}
			want[q+" "+id] = true
		}
	}
	// The first three are read from the streams; the next three wake the readers, each
	// blocked on its own node once it caught up.
	enqueue()
	_, out, errb := startJobs(t, append(append(slices.Clone(base), "tail", "--json", "--since", "0"), qs...)...)
	tailLines(t, out, 3)
	enqueue()
	lines := tailLines(t, out, 6)
	for _, l := range lines {
		if !want[l.Queue+" "+l.ID] || l.Event != "enqueued" {
			t.Errorf("line %+v, want one of the 6 enqueues", l)
		}
		delete(want, l.Queue+" "+l.ID)
		for _, q := range qs {
			if !strings.Contains(l.Cursor, q+"=") {
				t.Errorf("cursor %q lacks queue %s", l.Cursor, q)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("events not printed: %v (stderr %s)", want, errb.String())
	}
}

// `jobs tail` rides out a connection blip and a Redis restart: it says so once on stderr,
// retries, and resumes from its own cursor, printing every event once; it exits only on
// a signal (exit 0).
func TestTailSurvivesBlipAndRedisRestart(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("starts its own single redis-server")
	}
	t.Parallel()
	srv := redistest.Own(t)
	proxy := redistest.NewProxy(t, srv.Addr)
	p := redistest.Prefix(t)
	direct := func(q string) string {
		t.Helper()
		c, err := queue.NewClient(srv.Client(t), queue.Config{Prefix: p})
		if err != nil {
			t.Fatal(err)
		}
		id, err := c.Enqueue(context.Background(), "t", nil, queue.On(q))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	want := []string{direct("a")}
	cmd, out, errb := startJobs(t, "--redis", "redis://"+proxy.Addr(), "--prefix", p, "tail", "--json", "--since", "0")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tailLines(t, out, 1)

	proxy.Cut() // a blip: events committed meanwhile come after the reconnect
	want = append(want, direct("a"), direct("b"))
	tailLines(t, out, 3)

	srv.Kill()
	time.Sleep(1500 * time.Millisecond)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	want = append(want, direct("a")) // no persistence: the stream starts again
	lines := tailLines(t, out, 4)
	select {
	case err := <-exited:
		t.Fatalf("jobs tail exited (%v) across a Redis restart; stderr:\n%s", err, errb)
	default:
	}
	got := make([]string, len(lines))
	for i, l := range lines {
		got[i] = l.ID
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("jobs tail printed jobs %v, want %v once each; stdout:\n%s", got, want, out)
	}
	if n := strings.Count(errb.String(), "retrying"); n < 1 || n > 2 {
		t.Errorf("stderr has %d retry notices, want one per outage:\n%s", n, errb)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Errorf("jobs tail after SIGTERM: %v, want exit 0", err)
	}
}
