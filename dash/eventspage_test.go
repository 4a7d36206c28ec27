package dash

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

func TestEventsPage(t *testing.T) {
	b := setup(t, Options{})
	ready := b.enqueue(t, "email", "x", queue.On("mail"))
	dead := b.dead(t, "report", "x", "boom")
	r := b.get(t, "/events")
	wantStatus(t, "GET /events", r, 200)
	for _, want := range []string{`data-event="enqueued"`, `data-event="dead"`, ready, dead, "boom"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("events page lacks %q:\n%s", want, r.body)
		}
	}
	var d struct {
		Events []struct {
			Event string `json:"event"`
			ID    string `json:"id"`
			Queue string `json:"queue"`
		} `json:"events"`
	}
	b.getJSON(t, "/events?queue=default", &d)
	// Newest first: dead, started, enqueued of the dead job.
	var got []string
	for _, e := range d.Events {
		got = append(got, e.Event)
		if e.Queue != "default" {
			t.Errorf("event of queue %s on the page of default", e.Queue)
		}
	}
	if strings.Join(got, ",") != "dead,started,enqueued" {
		t.Errorf("events of default = %v, want dead,started,enqueued", got)
	}
	b.getJSON(t, "/events?event=enqueued&type=EMA", &d)
	if len(d.Events) != 1 || d.Events[0].ID != ready {
		t.Errorf("events filtered on enqueued, type EMA = %+v, want the email job's", d.Events)
	}
	// Every event name filters, the queue's own events too (limit was once refused).
	if err := b.client.SetLimit(context.Background(), "default", queue.Limit{Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	b.getJSON(t, "/events?queue=default&event=limit", &d)
	if len(d.Events) != 1 || d.Events[0].Event != "limit" {
		t.Errorf("events filtered on limit = %+v, want the limit change", d.Events)
	}
	for _, n := range queue.EventNames {
		wantStatus(t, "GET /events?event="+string(n), b.get(t, "/events?event="+string(n)), 200)
	}
	for _, p := range []string{"/events?event=bogus", "/events?queue=a%20b", "/events?type=" + strings.Repeat("x", 201)} {
		wantStatus(t, "GET "+p, b.get(t, p), 400)
	}
}

func TestCronPage(t *testing.T) {
	b := setup(t, Options{})
	ctx := context.Background()
	store := cron.NewStore(b.client)
	for _, e := range []cron.Entry{{Name: "nightly", Spec: "@hourly", Type: "report"},
		{Name: "<b>x</b>", Spec: "@every 5s", Type: "t<script>", Queue: "other"}} {
		if err := store.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// nightly last fired three hours ago: two ticks were missed since.
	last := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	id, err := b.client.Enqueue(ctx, "report", nil, queue.ID(cron.JobID("nightly", last)))
	if err != nil {
		t.Fatal(err)
	}
	state := `{"last_tick":"` + last.UTC().Format(time.RFC3339) + `","last_job":"` + id + `"}`
	if err := brokerOf(b).Redis().HSet(ctx, proto.CronKeysOf(b.client.Config().Prefix).State, "nightly", state).Err(); err != nil {
		t.Fatal(err)
	}
	r := b.get(t, "/cron")
	wantStatus(t, "GET /cron", r, 200)
	markupFree(t, "GET /cron", r.body, true)
	for _, want := range []string{`data-entry="nightly" data-missed="true"`, id + "</a> ready", "&lt;b&gt;x&lt;/b&gt;"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("cron page lacks %q:\n%s", want, r.body)
		}
	}
	var d struct {
		Entries []struct {
			Name     string     `json:"name"`
			Missed   bool       `json:"missed"`
			NextTick *time.Time `json:"next_tick"`
			State    string     `json:"last_job_state"`
		} `json:"entries"`
	}
	b.getJSON(t, "/cron", &d)
	if len(d.Entries) != 2 {
		t.Fatalf("cron JSON = %+v, want 2 entries", d.Entries)
	}
	for _, e := range d.Entries {
		if e.NextTick == nil || (e.Name == "nightly") != e.Missed {
			t.Errorf("cron entry %+v: want a next tick, missed only for nightly", e)
		}
	}
}

func TestCronActions(t *testing.T) {
	b := setup(t, Options{})
	ctx := context.Background()
	store := cron.NewStore(b.client)
	if err := store.Add(ctx, cron.Entry{Name: "n/1", Spec: "@hourly", Type: "report", Queue: "rep"}); err != nil {
		t.Fatal(err)
	}
	r := b.post(t, "/cron/"+url.PathEscape("n/1")+"/trigger", nil)
	wantStatus(t, "POST trigger", r, 303)
	var d listJSON
	b.getJSON(t, "/queues/rep?state=ready", &d)
	if len(d.Jobs) != 1 || !strings.HasPrefix(d.Jobs[0].ID, "cron:n/1:") {
		t.Fatalf("queue rep after trigger = %+v, want one cron:n/1:... job", d.Jobs)
	}
	// A second trigger within the same second is this second's tick again: 409, or a new
	// second's job.
	if r := b.post(t, "/cron/n%2F1/trigger", nil); r.status != 409 && r.status != 303 {
		t.Errorf("second trigger = %d, want 409 (same second) or 303", r.status)
	}
	wantStatus(t, "POST trigger of an unknown entry", b.post(t, "/cron/nope/trigger", nil), 404)
	wantStatus(t, "POST remove", b.post(t, "/cron/n%2F1/remove", nil), 303)
	if es, _ := store.List(ctx); len(es) != 0 {
		t.Errorf("entries after remove = %+v, want none", es)
	}
	wantStatus(t, "POST remove again", b.post(t, "/cron/n%2F1/remove", nil), 404)
	var a auditData
	b.getJSON(t, "/audit", &a)
	if len(a.Entries) < 3 || a.Entries[len(a.Entries)-1].Action != "cron-trigger" {
		t.Errorf("audit = %+v, want the cron actions", a.Entries)
	}
}
