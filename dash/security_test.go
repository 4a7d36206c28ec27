package dash

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/queue"
)

// every GET route, and every action (POST) with a form that would succeed.
func routes(b *bundle, t *testing.T) (gets []string, posts map[string]url.Values) {
	t.Helper()
	dead := b.dead(t, "t", "x", "boom")
	sched := b.enqueue(t, "t", "x", queue.Delay(time.Hour))
	w := b.register(t, "h:1:x")
	store := cron.NewStore(b.client)
	for _, name := range []string{"c1", "c2"} {
		if err := store.Add(context.Background(), cron.Entry{Name: name, Spec: "@hourly", Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	q := url.Values{"queue": {"default"}}
	gets = []string{"/", "/queues/default", "/queues/default?state=dead", "/queues/default/purge?state=dead",
		"/jobs/" + dead + "?queue=default", "/workers", "/audit", "/events", "/cron",
		"/queues/default/matching?state=dead&do=retry&type=t"}
	// The token of the count page of 1 dead job of type t (matching asks for it).
	tok := b.h.token("default", matchForm{State: queue.StateDead, Do: "retry", Filter: filter{Type: "t"}}, 1)
	posts = map[string]url.Values{
		"/jobs/" + dead + "/retry": q, "/jobs/" + sched + "/run": q, "/jobs/" + sched + "/cancel": q,
		"/jobs/" + dead + "/delete": q, "/queues/default/pause": {}, "/queues/default/resume": {},
		"/queues/default/retry-dead": {}, "/queues/default/purge": {"state": {"scheduled"}},
		"/workers/" + w + "/quiet": {}, "/workers/" + w + "/stop": {},
		"/cron/c1/trigger": {}, "/cron/c2/remove": {},
		"/queues/default/selected": {"do": {"delete"}, "id": {sched}},
		"/queues/default/matching": {"do": {"retry"}, "state": {"dead"}, "type": {"t"}, "count": {"1"}, "token": {tok}},
		"/cron":                    {"name": {"c3"}, "spec": {"@hourly"}, "type": {"t"}},
	}
	if len(posts) != len(jobActions)+len(queueActions)+len(workerActions)+len(cronActions)+1 { // +1: POST /cron adds
		t.Fatalf("routes() covers %d actions, want every one of %v %v %v", len(posts), jobActions, queueActions, workerActions)
	}
	return gets, posts
}

// snapshotOf is what an action could change: counts, audit log, the process's order.
func snapshotOf(t *testing.T, b *bundle) string {
	t.Helper()
	ctx := context.Background()
	st, err := b.client.StatsOf(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	es, err := b.client.AuditLog(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := b.client.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := st[0]
	s.Latency = 0
	entries, err := cron.NewStore(b.client).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join([]string{string(mustJSON(t, s)), string(mustJSON(t, len(es))), string(mustJSON(t, entries))}, " ")
	for _, p := range ps {
		out += " " + p.ID + ":" + string(p.State)
	}
	return out
}

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	b := setup(t, Options{ReadOnly: true})
	gets, posts := routes(b, t)
	check := func(what string, r reply) {
		t.Helper()
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", what, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline or eval", what, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: X-Content-Type-Options %q, X-Frame-Options %q", what,
				r.header.Get("X-Content-Type-Options"), r.header.Get("X-Frame-Options"))
		}
	}
	for _, p := range append(gets, "/nope", "/static/dash.js") {
		check("GET "+p, b.get(t, p))
	}
	for p, f := range posts {
		check("POST "+p, b.post(t, p, f))
	}
}

// TestNoInlineScriptOrStyle: the pages carry no inline script, handler or style
// attribute, which the CSP would block (the JSON data island is not a script).
func TestNoInlineScriptOrStyle(t *testing.T) {
	b := setup(t, Options{})
	gets, _ := routes(b, t)
	for _, p := range gets {
		body := b.get(t, p).body
		for i := 0; ; {
			j := strings.Index(body[i:], "<script")
			if j < 0 {
				break
			}
			tag := body[i+j : i+j+strings.Index(body[i+j:], ">")+1]
			if !strings.Contains(tag, ` src="`) && !strings.Contains(tag, `type="application/json"`) {
				t.Errorf("GET %s has an inline script: %s", p, tag)
			}
			i += j + 1
		}
		for _, bad := range []string{" style=", "<style", " onclick=", " onload=", " onerror=", "javascript:"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s holds %q", p, bad)
			}
		}
	}
}

func TestReadOnlyRefusesEveryAction(t *testing.T) {
	b := setup(t, Options{ReadOnly: true})
	gets, posts := routes(b, t)
	before := snapshotOf(t, b)
	for p, f := range posts {
		r := b.post(t, p, f)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "read-only") {
			t.Errorf("read-only POST %s = %d, want 403 read-only; %.200s", p, r.status, r.body)
		}
		j := b.do(t, "POST", p, f, map[string]string{"Accept": "application/json"})
		if j.status != http.StatusForbidden || !strings.Contains(j.body, `"error":"the dashboard is read-only"`) {
			t.Errorf("read-only POST %s (JSON) = %d %s, want 403", p, j.status, j.body)
		}
	}
	if after := snapshotOf(t, b); after != before {
		t.Errorf("read-only POSTs changed Redis:\nbefore %s\nafter  %s", before, after)
	}
	for _, p := range gets {
		r := b.get(t, p)
		wantStatus(t, "read-only GET "+p, r, 200)
		if strings.Contains(r.body, `method="post"`) {
			t.Errorf("read-only GET %s shows an action form", p)
		}
	}
	if r := b.get(t, "/"); !strings.Contains(r.body, `id="read-only"`) {
		t.Error("read-only overview does not say it is read-only")
	}
}

func TestCrossOriginPostRefused(t *testing.T) {
	b := setup(t, Options{})
	_, posts := routes(b, t)
	before := snapshotOf(t, b)
	for p, f := range posts {
		for _, hdr := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
			{"Sec-Fetch-Site": "", "Origin": "https://evil.example"}, // an older browser: no Sec-Fetch-Site
		} {
			r := b.do(t, "POST", p, f, hdr)
			if r.status != http.StatusForbidden || !strings.Contains(r.body, "cross-origin") {
				t.Errorf("POST %s with %v = %d, want 403 cross-origin", p, hdr, r.status)
			}
		}
	}
	if after := snapshotOf(t, b); after != before {
		t.Errorf("cross-origin POSTs changed Redis:\nbefore %s\nafter  %s", before, after)
	}
}

func TestBasicAuth(t *testing.T) {
	b := setup(t, Options{Authorize: BasicAuth("ops", "s3cret")})
	b.enqueue(t, "t", "x")
	for _, p := range []string{"/", "/queues/default", "/static/dash.css", "/audit"} {
		for _, cred := range [][2]string{{"", ""}, {"ops", "wrong"}, {"op", "s3cret"}, {"ops", "s3cret "}, {"OPS", "s3cret"}} {
			req, _ := http.NewRequest("GET", b.srv.URL+p, nil)
			if cred[0] != "" {
				req.SetBasicAuth(cred[0], cred[1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("GET %s as %v = %d (WWW-Authenticate %q), want 401 Basic", p, cred, resp.StatusCode,
					resp.Header.Get("WWW-Authenticate"))
			}
		}
		req, _ := http.NewRequest("GET", b.srv.URL+p, nil)
		req.SetBasicAuth("ops", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s with the right credentials = %d, want 200", p, resp.StatusCode)
		}
	}
	// An unauthenticated POST changes nothing either.
	if r := b.post(t, "/queues/default/pause", nil); r.status != http.StatusUnauthorized {
		t.Errorf("POST pause without credentials = %d, want 401", r.status)
	}
	// The audit log names the user.
	req, _ := http.NewRequest("POST", b.srv.URL+"/queues/default/pause", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth("ops", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	es, _ := b.client.AuditLog(context.Background(), "", 10)
	if resp.StatusCode != 200 || len(es) != 1 || es[0].Who != "ops" {
		t.Errorf("authenticated pause = %d, audit %+v; want 200 and who=ops", resp.StatusCode, es)
	}
}

// BasicAuth with an empty user or password (README's sample with DASH_PASS unset)
// admits nobody, the empty credentials it was given included.
func TestBasicAuthWithAnEmptySecretAdmitsNobody(t *testing.T) {
	for _, want := range [][2]string{{"ops", ""}, {"", "s3cret"}, {"", ""}} {
		auth := BasicAuth(want[0], want[1])
		for _, cred := range [][2]string{want, {"ops", "x"}, {"", ""}} {
			req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
			req.SetBasicAuth(cred[0], cred[1])
			if who, ok := auth(req); ok {
				t.Errorf("BasicAuth(%q, %q) admitted %v as %q, want nobody", want[0], want[1], cred, who)
			}
		}
	}
}

// Actions take form bodies only, as README says: a text/plain or multipart POST, which
// carried no fields an action needs (pause needs none), paused the queue all the same.
func TestActionsTakeFormBodiesOnly(t *testing.T) {
	b := setup(t, Options{})
	b.enqueue(t, "t", "x")
	for _, ct := range []string{"text/plain", "multipart/form-data; boundary=x", "application/json", ""} {
		req, _ := http.NewRequest("POST", b.srv.URL+"/queues/default/pause", strings.NewReader("do=retry"))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("POST pause with Content-Type %q = %d, want 415", ct, resp.StatusCode)
		}
	}
	st, err := b.client.StatsOf(context.Background(), "default")
	if err != nil || st[0].Paused {
		t.Errorf("queue paused = %v (%v) after refused posts, want not paused", st[0].Paused, err)
	}
	wantStatus(t, "POST pause as a form", b.post(t, "/queues/default/pause", nil), http.StatusSeeOther)
}
