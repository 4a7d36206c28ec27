package dash

import (
	"context"
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
