package dash

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/queue"
)

// Jobs waiting under a limit key are ready jobs on every page: the overview and the queue
// page count them, the ready list shows them after the others with their key (HTML and
// JSON), and a job's cancel and delete take them off their key's list.
func TestKeyedReadyJobsShown(t *testing.T) {
	b := setup(t, Options{})
	plain := b.enqueue(t, "t", "x")
	a1 := b.enqueue(t, "t", "x", queue.LimitKey("cust:A"))
	a2 := b.enqueue(t, "t", "x", queue.LimitKey("cust:A"))
	// Keys that enter the ring in the same millisecond tie and go by name: B's after A's.
	bk := b.enqueue(t, "t", "x", queue.LimitKey("cust:B<x>"))
	if page := b.get(t, "/"); !strings.Contains(page.body, `data-count="ready"><a href="/queues/default?state=ready">4</a>`) {
		t.Errorf("overview does not count 4 ready:\n%s", page.body)
	}
	page := b.get(t, "/queues/default?state=ready")
	for _, want := range []string{`<th>limit key</th>`, `data-count="ready">4</span>`,
		`<td data-limit-key="cust:A">cust:A</td>`, `<td data-limit-key="">-</td>`, `cust:B&lt;x&gt;`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("queue page lacks %s:\n%s", want, page.body)
		}
	}
	var d struct {
		Stats queue.QueueStats `json:"stats"`
		Jobs  []struct {
			ID       string `json:"id"`
			LimitKey string `json:"limit_key"`
		} `json:"jobs"`
		Next string `json:"next"`
	}
	b.getJSON(t, "/queues/default?state=ready", &d)
	var got []string
	for _, j := range d.Jobs {
		got = append(got, j.ID+"/"+j.LimitKey)
	}
	want := plain + "/," + a1 + "/cust:A," + a2 + "/cust:A," + bk + "/cust:B<x>"
	if strings.Join(got, ",") != want || d.Stats.Ready != 4 || d.Stats.KeysWaiting != 2 || d.Next != "" {
		t.Errorf("queue page JSON = %v (ready %d, keys %d, next %q);\nwant %s, 4, 2, none", got, d.Stats.Ready,
			d.Stats.KeysWaiting, d.Next, want)
	}
	for _, tc := range []struct{ action, id string }{{"cancel", bk}, {"delete", a1}} {
		r := b.post(t, "/jobs/"+url.PathEscape(tc.id)+"/"+tc.action, url.Values{"queue": {"default"}})
		wantStatus(t, "POST "+tc.action+" of a keyed ready job", r, http.StatusSeeOther)
	}
	st, err := b.client.StatsOf(context.Background(), "default")
	if err != nil || st[0].Ready != 2 || st[0].KeysWaiting != 1 || st[0].Dead != 1 {
		t.Errorf("after cancel and delete, StatsOf() = %+v, %v; want 2 ready, key A alone waiting, 1 dead", st, err)
	}
	// Paged by 2 (the second page starts in the keys), and every job read once.
	t.Run("paged", func(t *testing.T) {
		small := setup(t, Options{PageSize: 2})
		for range 3 {
			small.enqueue(t, "t", "x", queue.LimitKey("k"))
		}
		small.enqueue(t, "t", "x")
		seen, cursor := 0, ""
		for range 5 {
			v := url.Values{"state": {"ready"}}
			if cursor != "" {
				v.Set("cursor", cursor)
			}
			var d struct {
				Jobs []struct{} `json:"jobs"`
				Next string     `json:"next"`
			}
			small.getJSON(t, "/queues/default?"+v.Encode(), &d)
			seen += len(d.Jobs)
			if cursor = d.Next; cursor == "" {
				break
			}
		}
		if seen != 4 || cursor != "" {
			t.Errorf("paging the ready list by 2 read %d jobs (cursor %q), want 4 and the end", seen, cursor)
		}
	})
}
