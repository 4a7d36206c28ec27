package dash

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/queue"
)

func TestJobPageShowsItsWorkflow(t *testing.T) {
	b := setup(t, Options{})
	dep := b.enqueue(t, "charge", `{}`)
	id := b.enqueue(t, "ship", `{}`, queue.After(dep))
	r := b.get(t, "/jobs/"+id+"?queue=default")
	wantStatus(t, "GET /jobs/ID of a waiting job", r, 200)
	for _, want := range []string{`data-state="waiting"`, `data-dependency="default/` + dep + `"`, "(waits for it)",
		`id="action-cancel"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("waiting job's page lacks %q:\n%s", want, r.body)
		}
	}
	if r := b.get(t, "/jobs/"+dep+"?queue=default"); !strings.Contains(r.body, `data-dependent="default/`+id+`"`) {
		t.Errorf("dependency's page does not list its dependent %s:\n%s", id, r.body)
	}
	ref, _, err := b.client.NewBatch(context.Background(), queue.BatchOptions{OnDeath: &queue.Callback{Type: "alert"}},
		[]queue.BatchJob{{Type: "row"}, {Type: "row"}})
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Batch *queue.BatchStatus `json:"batch"`
	}
	b.getJSON(t, "/jobs/"+ref.ID+".0?queue=default", &d)
	if d.Batch == nil || d.Batch.ID != ref.ID || d.Batch.Total != 2 || d.Batch.Pending != 2 {
		t.Errorf("child's page batch = %+v, want its batch's counts", d.Batch)
	}
	if r := b.get(t, "/queues/default?state=waiting"); r.status != 200 || !strings.Contains(r.body, id) {
		t.Errorf("queue page, waiting tab: %d, lacks the waiting job", r.status)
	}
}

// TestBatchPage reads a batch whose death callback fired: its counts and the link to the
// callback's job, the same object as JSON that `jobs batch inspect --json` prints, the
// link to it from a child's page, and 404 for unknown and hostile IDs.
func TestBatchPage(t *testing.T) {
	b := setup(t, Options{})
	ctx := context.Background()
	ref, _, err := b.client.NewBatch(ctx, queue.BatchOptions{OnDeath: &queue.Callback{Type: "alert"},
		OnSuccess: &queue.Callback{Type: "report"}}, []queue.BatchJob{{Type: "row", Options: []queue.Option{queue.MaxRetry(0)}}, {Type: "row"}})
	if err != nil {
		t.Fatal(err)
	}
	b.claimAndFail(t, ref.ID+".0", "bad row")
	want, err := b.client.BatchStatus(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !want.Callbacks["death"].Fired {
		t.Fatalf("death callback did not fire: %+v", want)
	}
	var got queue.BatchStatus
	b.getJSON(t, "/batches/"+ref.ID, &got)
	if string(mustJSON(t, got)) != string(mustJSON(t, want)) {
		t.Errorf("GET /batches/ID as JSON = %s, want %s", mustJSON(t, got), mustJSON(t, want))
	}
	r := b.get(t, "/batches/"+ref.ID+"?queue=default")
	wantStatus(t, "GET /batches/ID", r, 200)
	for _, s := range []string{`data-state="running"`, `data-count="total">2<`, `data-count="pending">1<`,
		`data-count="dead">1<`, `data-count="done">0<`, `data-callback="death"`, `href="/jobs/` + want.Callbacks["death"].Job + `?queue=default"`,
		`data-callback="success"`, "not fired", `id="batch-children"`} {
		if !strings.Contains(r.body, s) {
			t.Errorf("batch page lacks %q:\n%s", s, r.body)
		}
	}
	if r := b.get(t, "/jobs/"+ref.ID+".1?queue=default"); !strings.Contains(r.body, `href="/batches/`+ref.ID+`?queue=default"`) {
		t.Errorf("child's page does not link its batch:\n%s", r.body)
	}
	r = b.get(t, "/batches/nosuchbatch")
	wantStatus(t, "GET /batches/unknown", r, 404)
	if !strings.Contains(r.body, "batch nosuchbatch not found") {
		t.Errorf("GET /batches/unknown says %.300s, want the batch named as not found", r.body)
	}
	wantStatus(t, "GET /batches/ID in another queue", b.get(t, "/batches/"+ref.ID+"?queue=other"), 404)
	wantStatus(t, "GET /batches/ID?queue=bad name", b.get(t, "/batches/"+ref.ID+"?queue=a%20b"), 400)
	for _, h := range hostile {
		r := b.get(t, "/batches/"+url.PathEscape(h))
		wantStatus(t, "GET /batches/hostile", r, 404)
		markupFree(t, "batch page for ID "+h, r.body, true)
	}
}

// TestWorkflowGraph shows a fan-in job's graph: its dependencies with their states, and a
// dependency's graph with its dependents, bounded at graphSide a side with "and N more".
func TestWorkflowGraph(t *testing.T) {
	b := setup(t, Options{})
	var after []string
	for range graphSide + 2 {
		after = append(after, b.enqueue(t, "up", `{}`))
	}
	b.claimAndFail(t, after[0], "x") // dead: its dependent's graph shows it
	fanIn := b.enqueue(t, "fanin", `{}`, queue.After(after...), queue.IgnoreDependencyFailure())
	r := b.get(t, "/jobs/"+fanIn+"?queue=default")
	if n := strings.Count(r.body, `data-dependency="default/`); n != graphSide {
		t.Errorf("fan-in's graph shows %d dependencies, want %d", n, graphSide)
	}
	for _, s := range []string{`id="graph-up-more">and 2 more<`, "no dependents waiting",
		`data-dependency="default/` + after[0] + `"><a href="/jobs/` + after[0] + `?queue=default">default/` + after[0] + `</a> <span class="state" data-state="dead">`,
		`data-dependency="default/` + after[1] + `"><a href="/jobs/` + after[1] + `?queue=default">default/` + after[1] + `</a> <span class="state" data-state="ready">ready</span> <small>(waits for it)</small>`} {
		if !strings.Contains(r.body, s) {
			t.Errorf("fan-in's graph lacks %q:\n%s", s, r.body)
		}
	}
	root := b.enqueue(t, "root", `{}`)
	var kids []string
	for range graphSide + 3 {
		kids = append(kids, b.enqueue(t, "kid", `{}`, queue.After(root)))
	}
	r = b.get(t, "/jobs/"+root+"?queue=default")
	wantStatus(t, "GET /jobs/root", r, 200)
	if n := strings.Count(r.body, `data-dependent="default/`); n != graphSide {
		t.Errorf("root's graph shows %d dependents, want %d", n, graphSide)
	}
	// Of more than graphSide dependents, graphSide picked at random are shown.
	shown := ""
	for _, k := range kids {
		if strings.Contains(r.body, `data-dependent="default/`+k+`"`) {
			shown = k
			break
		}
	}
	for _, s := range []string{`id="graph-self"`, `id="graph-down-more">and 3 more<`, "no dependencies",
		`data-dependent="default/` + shown + `"><a href="/jobs/` + shown + `?queue=default">default/` + shown + `</a> <span class="state" data-state="waiting">`} {
		if !strings.Contains(r.body, s) {
			t.Errorf("root's graph lacks %q:\n%s", s, r.body)
		}
	}
	if r := b.get(t, "/jobs/"+fanIn+"?queue=default"); strings.Contains(r.body, "<style") || strings.Contains(r.body, "style=") {
		t.Errorf("graph uses inline style, which the CSP refuses")
	}
}
