package main

import (
	"context"
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
