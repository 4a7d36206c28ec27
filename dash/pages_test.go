package dash

import (
	"strings"
	"testing"
)

func TestOverviewShowsQueues(t *testing.T) {
	b := setup(t, Options{})
	b.enqueue(t, "email", `{"to":"a@b.c"}`)
	r := b.get(t, "/")
	wantStatus(t, "GET /", r, 200)
	for _, want := range []string{`data-queue="default"`, `id="chart"`, `id="chart-data"`, `data-count="ready"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("GET / has no %s:\n%s", want, r.body)
		}
	}
	var d struct {
		Queues []struct {
			Name  string `json:"name"`
			Ready int    `json:"ready"`
		} `json:"queues"`
		Throughput []spanTotal `json:"throughput"`
	}
	b.getJSON(t, "/", &d)
	if len(d.Queues) != 1 || d.Queues[0].Name != "default" || d.Queues[0].Ready != 1 {
		t.Errorf("GET / JSON queues = %+v, want default with 1 ready", d.Queues)
	}
	if len(d.Throughput) != 3 {
		t.Errorf("GET / JSON throughput = %+v, want 3 spans", d.Throughput)
	}
}
