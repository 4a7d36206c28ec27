package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// TestEnqueueFileQueueFlag: --queue is the queue of a --file's lines that name none, with
// --batch or without (the batch went on --queue while its jobs went on default, and
// without --batch --queue was refused by a message that said it was allowed).
func TestEnqueueFileQueueFlag(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	client, _ := queue.NewClient(redistest.Client(t), queue.Config{Prefix: p})
	ctx := context.Background()
	lines := `{"type":"m","payload":"1","id":"a"}` + "\n" + `{"type":"m","payload":"2","id":"b","queue":"own"}` + "\n"
	r := jobs(t, p, lines, "enqueue", "--queue", "qb", "--file", "-", "--batch", "--on-complete", "cb")
	if r.code != 0 {
		t.Fatalf("enqueue --file --batch --queue qb = %+v", r)
	}
	batch := strings.TrimSpace(r.stdout)
	for _, want := range []struct{ queue, id string }{{"qb", "a"}, {"own", "b"}} {
		if j, err := client.Get(ctx, want.queue, want.id); err != nil || j.Batch.ID != batch {
			t.Errorf("job %s in queue %s = %+v, %v; want it there, in batch %s", want.id, want.queue, j, err, batch)
		}
	}
	if _, err := client.Get(ctx, queue.DefaultQueue, "a"); err == nil {
		t.Errorf("job a is on %s too", queue.DefaultQueue)
	}
	r = jobs(t, p, `{"type":"m","id":"c"}`+"\n", "enqueue", "--queue", "qf", "--file", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "enqueued 1 jobs") {
		t.Fatalf("enqueue --file --queue qf = %+v", r)
	}
	if _, err := client.Get(ctx, "qf", "c"); err != nil {
		t.Errorf("job c not on qf: %v", err)
	}
	r = jobs(t, p, "", "enqueue", "--queue", "qf", "--delay", "1m", "--file", "-")
	if r.code != 2 || !strings.Contains(r.stderr, "no other flag but --queue") {
		t.Errorf("enqueue --file --delay = %+v, want exit 2 naming what is allowed", r)
	}
}

// TestEmptyValuesRefused: an empty flag value silently meant the default or nothing
// (--id "" generated an ID, --exclusive-key "" keyed the lock on the type, --prefix ""
// meant jobs) and --after /id made a job that died at once ("dependency default//id
// died"). Each is a usage error that enqueues nothing; jobs dev --dash "" (no dashboard)
// is the one empty value with a meaning.
func TestEmptyValuesRefused(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"enqueue", "--id", "", "t"}, "--id '': an empty value is not allowed"},
		{[]string{"enqueue", "--exclusive-key", "", "t"}, "--exclusive-key '': an empty value is not allowed"},
		{[]string{"enqueue", "--unique-for", "1h", "--unique-key", "", "t"}, "--unique-key '': an empty value"},
		{[]string{"enqueue", "--after", "", "t"}, "--after '': an empty value"},
		{[]string{"enqueue", "--after", "a,", "t"}, "--after '': an empty value"},
		{[]string{"enqueue", "--after", "/id", "t"}, `--after "/id": no queue before '/'`},
		{[]string{"enqueue", "--after", "q/", "t"}, `--after "q/"`},
		{[]string{"tail", "--type", ""}, "--type '': an empty value"},
		{[]string{"worker", "--run", "t=true", "--queue", ""}, "--queue '': an empty value"},
	} {
		r := jobs(t, p, "", tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("jobs %q = %+v, want exit 2 and one line with %q", tc.args, r, tc.want)
		}
	}
	r := runCLI("", "--redis", "redis://"+redistest.Shared(t).Addr, "--prefix", "", "enqueue", "t")
	if r.code != 2 || r.stderr != "jobs: --prefix is empty (or JOBS_PREFIX is set empty): give a value or leave it out\n" {
		t.Errorf("--prefix '' = %+v, want exit 2", r)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "JOBS_TEST_CHILD=jobs", "JOBS_PREFIX=",
		"JOBS_TEST_ARGS="+strings.Join([]string{"--redis", "redis://" + redistest.Shared(t).Addr, "ls"}, "\x1f"))
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "JOBS_PREFIX is set empty") {
		t.Errorf("JOBS_PREFIX='' jobs ls = %v %q, want exit 2", err, out)
	}
	if r := jobs(t, p, "", "ls", "default"); r.code != 1 || !strings.Contains(r.stderr, `no queue "default"`) {
		t.Errorf("after the refused enqueues: %+v, want no job enqueued", r)
	}
}
