package dash

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// hostile are texts users and handlers may write: markup, attribute breakouts, terminal
// escapes, bidi overrides, invalid UTF-8.
var hostile = []string{
	"<script>alert(1)</script>",
	`"><img src=x onerror=alert(1)>`,
	"'><svg onload=alert(1)>",
	"\x1b]0;owned\x07\x1b[2J\x1b[31mred",
	"\u202etxt.exe",
	"\xff\xfe<b>bold</b>",
	"</textarea></pre><script>alert(2)</script>",
	"{{.Data}}",
}

// markupFree fails the test if body holds any hostile text's markup unescaped, or, with
// text set, a control character, bidi override or invalid byte anywhere.
func markupFree(t *testing.T, what, body string, text bool) {
	t.Helper()
	bad := []string{"<script>alert", "<img src=x", "<svg onload", "<b>bold", "</textarea></pre><script>"}
	if text {
		bad = append(bad, "\x1b", "\u202e", "\xff")
	}
	for _, bad := range bad {
		if strings.Contains(body, bad) {
			t.Errorf("%s: hostile text %q reached the page unescaped", what, bad)
		}
	}
}

// TestHostileInputShownAsText enqueues jobs whose type, payload, error, result, worker,
// progress message and metadata are hostile, and reads every page that shows them.
func TestHostileInputShownAsText(t *testing.T) {
	b := setup(t, Options{})
	ctx := context.Background()
	var ids []string
	for i, h := range hostile {
		typ := strings.Map(func(r rune) rune { // types refuse control characters: keep the rest
			if r < 0x20 || r == 0x7f {
				return '?'
			}
			return r
		}, h)
		if !strings.HasPrefix(typ, "\xff") {
			typ = strings.ToValidUTF8(typ, "?")
		}
		id, err := b.client.Enqueue(ctx, typ, []byte(h), queue.MaxRetry(0), queue.Meta("k"+string(rune('a'+i)), "v"+h[:min(len(h), 200)]))
		if err != nil {
			id, err = b.client.Enqueue(ctx, "t", []byte(h), queue.MaxRetry(0))
		}
		if err != nil {
			t.Fatalf("Enqueue(%q) err = %v", h, err)
		}
		ids = append(ids, id)
		js, err := brokerOf(b).Claim(ctx, "default", 1, time.Minute, "w"+h)
		if err != nil || len(js) != 1 {
			t.Fatalf("Claim() = %v, %v", js, err)
		}
		if i%2 == 0 {
			if _, err := brokerOf(b).Fail(ctx, js[0], h, proto.NoRetry); err != nil {
				t.Fatal(err)
			}
		} else if err := brokerOf(b).Ack(ctx, js[0], []byte(h)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.client.Audit(ctx, queue.AuditEntry{Who: hostile[0], Action: hostile[1], Queue: hostile[2],
		Target: hostile[3], Detail: hostile[5]}); err != nil {
		t.Fatal(err)
	}
	b.register(t, "w"+hostile[1])
	pages := []string{"/", "/queues/default?state=dead", "/queues/default?state=done", "/workers", "/audit", "/events",
		"/queues/default?state=dead&type=" + url.QueryEscape(hostile[0]) + "&error=" + url.QueryEscape(hostile[1]),
		"/jobs/" + url.PathEscape(hostile[0]) + "?queue=default", // an ID no job has: its error page
		"/batches/" + url.PathEscape(hostile[1]), "/batches/" + url.PathEscape(hostile[3]) + "?queue=default",
		"/queues/" + url.PathEscape(hostile[1]),
		"/queues/default?state=" + url.QueryEscape(hostile[0]),
		"/queues/default/purge?state=" + url.QueryEscape(hostile[1])}
	for _, id := range ids {
		pages = append(pages, "/jobs/"+url.PathEscape(id)+"?queue=default")
	}
	for _, p := range pages {
		r := b.get(t, p)
		markupFree(t, "GET "+p, r.body, true)
	}
	// The JSON keeps the exact bytes (base64 when not UTF-8), as the CLI's --json does.
	var d struct {
		Job struct {
			LastError string `json:"last_error"`
		} `json:"job"`
	}
	b.getJSON(t, "/jobs/"+ids[0]+"?queue=default", &d)
	if d.Job.LastError != hostile[0] {
		t.Errorf("JSON last_error = %q, want %q exactly", d.Job.LastError, hostile[0])
	}
}

// FuzzPagesEscape renders the job and queue pages of a job whose every text field is
// the fuzzed string: escaping must keep the page's markup exactly that of a harmless
// job's (as many <, >, " and ' as with "x"), whatever the text.
func FuzzPagesEscape(f *testing.F) {
	for _, h := range hostile {
		f.Add(h)
	}
	f.Add("")
	f.Add(`{"a":"<b>","c":[1,2]}`)
	h, err := New(&queue.Client{}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	render := func(s string) []string {
		j := &queue.Job{ID: "x" + s, Type: "x" + s, Queue: "default", Payload: []byte(s), State: queue.StateDead,
			LastError: "x" + s, Result: []byte(s), Worker: "x" + s, Exclusive: "x" + s, ProgressMessage: s,
			ProgressAt: time.Unix(1, 0), Meta: map[string]string{"k": s},
			Attempts: []queue.Attempt{{Attempt: 1, Worker: s, Outcome: "dead", Error: s}}}
		jd := jobData{Job: j, UniqueKey: "x" + s, UniqueHolder: s, CLI: []string{"jobs inspect " + shellQuote(s)},
			Payload: showBytes(j.Payload), Result: showBytes(j.Result), Actions: jobActionsFor(j.State),
			Graph: &workflowGraph{Up: []graphNode{{JobRef: queue.JobRef{Queue: s, ID: s}, State: queue.StateReady, Pending: true}},
				Down: []graphNode{{JobRef: queue.JobRef{Queue: s, ID: "x" + s}}}, UpMore: 1, DownMore: 2},
			Batch: &queue.BatchStatus{ID: s, Queue: s, State: queue.BatchRunning,
				Callbacks: map[string]queue.CallbackStatus{"death": {Type: s, Fired: true, Job: s}}}}
		bd := batchView{BatchStatus: &queue.BatchStatus{ID: s, Queue: s, State: queue.BatchRunning, Total: 2, Pending: 1,
			Callbacks: map[string]queue.CallbackStatus{"death": {Type: s, Fired: true, Job: s}, "success": {Type: "x" + s}}},
			CLI: "jobs batch inspect " + shellQuote(s)}
		ld := listData{Queue: "default", State: queue.StateDead, Jobs: []*queue.Job{j},
			Filter: filter{Type: s, Error: s, Payload: s}, NextURL: "/q?x=" + url.QueryEscape(s)}
		ad := auditData{Entries: []queue.AuditEntry{{Who: s, Action: s, Queue: s, Target: s, Detail: "x" + s}}}
		md := matchCount{Queue: "default", matchForm: matchForm{State: queue.StateDead, Do: "retry",
			Filter: filter{Type: s, Error: s, Payload: s}}, Count: 200, Matched: 200, Read: 200, Total: 200, Complete: true,
			Typed: true, Token: "t"}
		cd := cronData{Entries: []cronRow{{Listed: cron.Listed{Entry: cron.Entry{Name: "x" + s, Spec: "x" + s, Type: "x" + s,
			Queue: "x" + s}}}}, Error: "x" + s, FormError: "x" + s,
			Form: cronForm{Name: s, Spec: s, Type: s, Payload: s, Queue: s, MaxRetry: s, Timeout: s}}
		var out []string
		for _, pg := range []struct {
			name string
			data any
		}{{"job", jd}, {"queue", ld}, {"audit", ad}, {"matchcount", md}, {"cron", cd}, {"batch", bd}} {
			w := httptest.NewRecorder()
			h.page(w, httptest.NewRequest("GET", "/", nil), 200, pg.name, "Job "+s, pg.data)
			out = append(out, w.Body.String())
		}
		return out
	}
	count := func(page string) [4]int {
		return [4]int{strings.Count(page, "<"), strings.Count(page, ">"), strings.Count(page, `"`), strings.Count(page, "'")}
	}
	base := render("x")
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			return // empty fields leave rows out: other markup, nothing user-written
		}
		// The payload shown as JSON, text or hex changes no markup: only escaping that
		// failed could add or remove a tag or an attribute's quotes.
		for i, page := range render(s) {
			if got, want := count(page), count(base[i]); got != want {
				t.Fatalf("page %d for %q: markup counts (<, >, \", ') = %v, want %v as for \"x\"", i, s, got, want)
			}
			markupFree(t, "fuzzed page", page, false)
		}
	})
}
