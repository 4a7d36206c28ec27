package dash

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

func TestJobActions(t *testing.T) {
	b := setup(t, Options{})
	dead := b.dead(t, "t", "x", "boom")
	sched := b.enqueue(t, "t", "x", queue.Delay(time.Hour))
	ready := b.enqueue(t, "t", "x")
	done := b.enqueue(t, "t", "x", queue.On("other"))
	for _, tc := range []struct {
		action, id, q string
		want          queue.State
	}{
		{"retry", dead, "default", queue.StateReady},
		{"run", sched, "default", queue.StateReady},
		{"cancel", ready, "default", queue.StateDead},
		{"delete", ready, "default", ""},
		{"delete", done, "other", ""},
	} {
		r := b.post(t, "/jobs/"+url.PathEscape(tc.id)+"/"+tc.action, url.Values{"queue": {tc.q}})
		wantStatus(t, "POST "+tc.action, r, http.StatusSeeOther)
		if got := b.state(t, tc.q, tc.id); got != tc.want {
			t.Errorf("after %s, job %s is %q, want %q", tc.action, tc.id, got, tc.want)
		}
		if loc := r.header.Get("Location"); !strings.Contains(loc, "done="+tc.action) {
			t.Errorf("POST %s redirects to %q, want a page with done=%s", tc.action, loc, tc.action)
		}
	}
	// The notice shows on the page redirected to.
	r := b.post(t, "/jobs/"+dead+"/cancel", url.Values{"queue": {"default"}})
	if page := b.get(t, r.header.Get("Location")); !strings.Contains(page.body, `id="notice"`) {
		t.Errorf("page after cancel shows no notice:\n%s", page.body)
	}
	// The audit log holds each, newest first.
	var a auditData
	b.getJSON(t, "/audit", &a)
	var got []string
	for _, e := range a.Entries {
		got = append(got, e.Action)
	}
	if strings.Join(got, ",") != "cancel,delete,delete,cancel,run,retry" {
		t.Errorf("audit log actions = %v, want cancel,delete,delete,cancel,run,retry", got)
	}
	if a.Entries[0].Who != "127.0.0.1" || a.Entries[0].Target != dead || a.Entries[0].Count != 1 {
		t.Errorf("audit entry = %+v, want who, target %s, count 1", a.Entries[0], dead)
	}
	if page := b.get(t, "/audit"); !strings.Contains(page.body, `data-action="retry"`) {
		t.Errorf("audit page lacks the retry entry:\n%s", page.body)
	}
}

func TestJobActionErrors(t *testing.T) {
	b := setup(t, Options{})
	ready := b.enqueue(t, "t", "x")
	// A dead unique job whose key another job took since: its retry is refused.
	ctx := context.Background()
	uniq, err := b.client.Enqueue(ctx, "u", nil, queue.Unique(time.Hour), queue.UniqueKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Cancel(ctx, "default", uniq); err != nil {
		t.Fatal(err)
	}
	holder, err := b.client.Enqueue(ctx, "u", nil, queue.Unique(time.Hour), queue.UniqueKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		form url.Values
		code int
		msg  string
	}{
		{"/jobs/" + ready + "/retry", url.Values{"queue": {"default"}}, 409, "it is ready"},
		{"/jobs/" + uniq + "/retry", url.Values{"queue": {"default"}}, 409, "held by job " + holder},
		{"/jobs/nope/delete", url.Values{"queue": {"default"}}, 404, "not found"},
		{"/jobs/" + ready + "/retry", url.Values{}, 400, "form field queue"},
		{"/jobs/" + ready + "/retry", url.Values{"queue": {"<script>"}}, 400, "form field queue"},
		{"/jobs/" + ready + "/explode", url.Values{"queue": {"default"}}, 404, "no page"},
		{"/queues/default/purge", url.Values{"state": {"active"}}, 400, "cancel them"},
		{"/queues/default/purge", url.Values{"state": {"nope"}}, 400, "form field state"},
		{"/queues/bad%20name/pause", url.Values{}, 400, "queue name"},
		{"/workers/nobody/stop", url.Values{}, 404, "no live"},
	} {
		r := b.post(t, tc.path, tc.form)
		if r.status != tc.code || !strings.Contains(r.body, tc.msg) {
			t.Errorf("POST %s %v = %d, want %d with %q; body %.300s", tc.path, tc.form, r.status, tc.code, tc.msg, r.body)
		}
	}
	// The query string is not a form body: an action takes its fields from the body only.
	r := b.post(t, "/jobs/"+ready+"/cancel?queue=default", url.Values{})
	wantStatus(t, "POST cancel with the queue in the URL only", r, 400)
	if got := b.state(t, "default", ready); got != queue.StateReady {
		t.Errorf("job is %q after a cancel without a form body, want ready", got)
	}
}

func TestQueueActions(t *testing.T) {
	b := setup(t, Options{})
	ctx := context.Background()
	d1, d2 := b.dead(t, "t", "x", "a"), b.dead(t, "t", "x", "b")
	wantStatus(t, "POST pause", b.post(t, "/queues/default/pause", nil), http.StatusSeeOther)
	st, _ := b.client.StatsOf(ctx, "default")
	if !st[0].Paused {
		t.Error("queue not paused after POST pause")
	}
	if page := b.get(t, "/queues/default"); !strings.Contains(page.body, `id="resume"`) || !strings.Contains(page.body, `id="paused"`) {
		t.Errorf("paused queue's page lacks the paused badge or the resume button:\n%s", page.body)
	}
	wantStatus(t, "POST resume", b.post(t, "/queues/default/resume", nil), http.StatusSeeOther)
	if st, _ := b.client.StatsOf(ctx, "default"); st[0].Paused {
		t.Error("queue still paused after POST resume")
	}
	r := b.do(t, "POST", "/queues/default/retry-dead", url.Values{},
		map[string]string{"Accept": "application/json", "Sec-Fetch-Site": "same-origin"})
	if r.status != 200 || !strings.Contains(r.body, `"count":2`) {
		t.Errorf("POST retry-dead (JSON) = %d %s, want 200 with count 2", r.status, r.body)
	}
	for _, id := range []string{d1, d2} {
		if got := b.state(t, "default", id); got != queue.StateReady {
			t.Errorf("dead job %s is %q after retry-dead, want ready", id, got)
		}
	}
	r = b.post(t, "/queues/default/purge", url.Values{"state": {"ready"}})
	wantStatus(t, "POST purge ready", r, http.StatusSeeOther)
	if st, _ := b.client.StatsOf(ctx, "default"); st[0].Ready != 0 {
		t.Errorf("%d ready after purge, want 0", st[0].Ready)
	}
}

// TestPurgeConfirm: above ConfirmAbove jobs, a purge shows the count and needs the
// queue's name typed; without it nothing is deleted.
func TestPurgeConfirm(t *testing.T) {
	b := setup(t, Options{ConfirmAbove: 3})
	for range 5 {
		b.enqueue(t, "t", "x")
	}
	page := b.get(t, "/queues/default/purge?state=ready")
	if !strings.Contains(page.body, `data-count="5"`) || !strings.Contains(page.body, `id="confirm"`) {
		t.Errorf("purge page lacks the count 5 or the confirm field:\n%s", page.body)
	}
	for _, confirm := range []string{"", "defaul", "DEFAULT"} {
		r := b.post(t, "/queues/default/purge", url.Values{"state": {"ready"}, "confirm": {confirm}})
		if r.status != 400 || !strings.Contains(r.body, "typed in the confirm field") {
			t.Errorf("purge with confirm %q = %d, want 400 asking for the name", confirm, r.status)
		}
	}
	if st, _ := b.client.StatsOf(context.Background(), "default"); st[0].Ready != 5 {
		t.Fatalf("%d ready after refused purges, want 5", st[0].Ready)
	}
	r := b.post(t, "/queues/default/purge", url.Values{"state": {"ready"}, "confirm": {"default"}})
	wantStatus(t, "purge with the name typed", r, http.StatusSeeOther)
	if st, _ := b.client.StatsOf(context.Background(), "default"); st[0].Ready != 0 {
		t.Errorf("%d ready after the confirmed purge, want 0", st[0].Ready)
	}
	var a auditData
	b.getJSON(t, "/audit", &a)
	if len(a.Entries) == 0 || a.Entries[0].Action != "purge" || a.Entries[0].Count != 5 || a.Entries[0].Target != "ready" {
		t.Errorf("audit = %+v, want purge of 5 ready first", a.Entries)
	}
	// At or below the threshold no name is asked for.
	b.enqueue(t, "t", "x")
	if page := b.get(t, "/queues/default/purge?state=ready"); strings.Contains(page.body, `id="confirm"`) {
		t.Error("purge page of 1 job asks for the name, want no confirm field")
	}
}

func TestWorkerActions(t *testing.T) {
	b := setup(t, Options{})
	id := b.register(t, "host:1:x")
	for _, a := range []string{"quiet", "stop"} {
		r := b.post(t, "/workers/"+url.PathEscape(id)+"/"+a, nil)
		wantStatus(t, "POST "+a, r, http.StatusSeeOther)
	}
	p := &queue.Process{ID: id, Kind: queue.KindWorker, Host: "h", PID: 1, State: queue.ProcessRunning}
	order, _, err := brokerOf(b).Register(context.Background(), p, time.Minute)
	if err != nil || order != "stop" {
		t.Errorf("the worker's next beat got order %q, %v; want stop", order, err)
	}
}

// TestSelectedJobs: the jobs checked on a list page get one action each; those that
// cannot take it are counted and named.
func TestSelectedJobs(t *testing.T) {
	b := setup(t, Options{})
	d1, d2 := b.dead(t, "t", "x", "a"), b.dead(t, "t", "x", "b")
	page := b.get(t, "/queues/default?state=dead")
	if !strings.Contains(page.body, `form="selection" aria-label="select"`) || !strings.Contains(page.body, `name="do" value="retry"`) {
		t.Fatalf("dead list lacks checkboxes or the retry button:\n%s", page.body)
	}
	// d1 twice (a form built by hand): acted on once, no failure reported.
	r := b.post(t, "/queues/default/selected", url.Values{"do": {"retry"}, "id": {d1, d2, d1}})
	wantStatus(t, "POST selected retry", r, http.StatusSeeOther)
	for _, id := range []string{d1, d2} {
		if got := b.state(t, "default", id); got != queue.StateReady {
			t.Errorf("selected dead job %s is %q after retry, want ready", id, got)
		}
	}
	// Retrying ready jobs fails for each: 409, nothing changed, the audit says so.
	r = b.post(t, "/queues/default/selected", url.Values{"do": {"retry"}, "id": {d1, "nope"}})
	if r.status != http.StatusConflict && r.status != http.StatusNotFound || !strings.Contains(r.body, "2 of 2 failed") {
		t.Errorf("POST selected retry of a ready and a missing job = %d %.300s, want 2 of 2 failed", r.status, r.body)
	}
	r = b.post(t, "/queues/default/selected", url.Values{"do": {"delete"}, "id": {d1, d2}})
	wantStatus(t, "POST selected delete", r, http.StatusSeeOther)
	if b.state(t, "default", d1) != "" || b.state(t, "default", d2) != "" {
		t.Error("selected jobs still exist after delete")
	}
	var a auditData
	b.getJSON(t, "/audit", &a)
	if a.Entries[0].Action != "selected-delete" || a.Entries[0].Count != 2 || a.Entries[1].Detail == "" {
		t.Errorf("audit = %+v, want selected-delete of 2 after a failed selected-retry", a.Entries[:2])
	}
	for _, f := range []url.Values{{"do": {"explode"}, "id": {d1}}, {"do": {"retry"}}} {
		if r := b.post(t, "/queues/default/selected", f); r.status != 400 {
			t.Errorf("POST selected %v = %d, want 400", f, r.status)
		}
	}
}

// TestEveryMatch: an action on every job matching a filter runs in bounded batches (at
// most ScanLimit jobs read per request), each continuing from the last, until every job
// of the state was read; the jobs that do not match are untouched.
func TestEveryMatch(t *testing.T) {
	b := setup(t, Options{PageSize: 2, ScanLimit: 4})
	var match, other []string
	for i := range 12 {
		if i%2 == 0 {
			match = append(match, b.dead(t, "resize", "x", "image too large"))
		} else {
			other = append(other, b.dead(t, "email", "x", "bounce"))
		}
	}
	page := b.get(t, "/queues/default?state=dead&error=too+large")
	if !strings.Contains(page.body, `id="matching"`) || !strings.Contains(page.body, `name="do" value="retry"`) {
		t.Fatalf("filtered dead list lacks the every-match form:\n%s", page.body)
	}
	var c matchCount
	b.getJSON(t, "/queues/default/matching?state=dead&do=retry&error=TOO+LARGE", &c)
	if c.Count != 6 || !c.Complete || c.Total != 12 || c.Read != 12 || c.Typed || c.Token == "" {
		t.Fatalf("count = %+v, want 6 of 12 counted, complete, no typing, a token", c)
	}
	form := url.Values{"state": {"dead"}, "do": {"retry"}, "error": {"TOO LARGE"}, "count": {"6"}, "token": {c.Token}}
	d, batches := b.everyMatch(t, form, 10)
	if d.Changed != 6 || d.Failed != 0 {
		t.Errorf("every match done: changed %d, failed %d; want 6, 0", d.Changed, d.Failed)
	}
	if batches < 3 {
		t.Errorf("%d batches for 12 jobs read 4 at a time, want at least 3", batches)
	}
	for _, id := range match {
		if got := b.state(t, "default", id); got != queue.StateReady {
			t.Errorf("matching job %s is %q, want ready", id, got)
		}
	}
	for _, id := range other {
		if got := b.state(t, "default", id); got != queue.StateDead {
			t.Errorf("job %s that does not match is %q, want dead", id, got)
		}
	}
	// The HTML form shows progress and a continue button until the end.
	b.getJSON(t, "/queues/default/matching?state=dead&do=delete&type=email", &c)
	b2 := b.post(t, "/queues/default/matching", url.Values{"state": {"dead"}, "do": {"delete"}, "type": {"email"},
		"count": {strconv.FormatInt(c.Count, 10)}, "token": {c.Token}})
	if b2.status != 200 || !strings.Contains(b2.body, `id="matching-continue"`) ||
		!strings.Contains(b2.body, `name="token" value="`+c.Token+`"`) {
		t.Errorf("first batch of a delete = %d, want the progress page with a continue button carrying the token", b2.status)
	}
	for _, f := range []url.Values{{"state": {"dead"}, "do": {"cancel"}, "type": {"x"}}, {"state": {"dead"}, "do": {"retry"}},
		{"state": {"nope"}, "do": {"retry"}, "type": {"x"}}, {"state": {"dead"}, "do": {"retry"}, "type": {"x"}, "read": {"-1"}}} {
		if r := b.post(t, "/queues/default/matching", f); r.status != 400 {
			t.Errorf("POST matching %v = %d, want 400", f, r.status)
		}
	}
}

// everyMatch posts form to /queues/default/matching, and each batch's continuation, until
// the last batch (at most most of them): its answer, and how many batches it took.
func (b *bundle) everyMatch(t *testing.T, form url.Values, most int) (matchingData, int) {
	t.Helper()
	for batches := 1; ; batches++ {
		if batches > most {
			t.Fatalf("more than %d batches", most)
		}
		r := b.do(t, "POST", "/queues/default/matching", form, map[string]string{"Accept": "application/json"})
		wantStatus(t, "POST matching", r, 200)
		var d matchingData
		if err := json.Unmarshal([]byte(r.body), &d); err != nil {
			t.Fatal(err)
		}
		if d.Next == "" {
			return d, batches
		}
		form.Set("cursor", d.Next)
		form.Set("changed", strconv.Itoa(d.Changed))
		form.Set("read", strconv.Itoa(d.Read))
		form.Set("failed", strconv.Itoa(d.Failed))
	}
}

// TestPurgePatternIsLiteral: the purge page's confirm field accepts the queue's name
// only, its "." included (a regex "." would accept any character there).
func TestPurgePatternIsLiteral(t *testing.T) {
	b := setup(t, Options{ConfirmAbove: 1})
	for range 2 {
		b.enqueue(t, "t", "x", queue.On("mail.eu"))
	}
	page := b.get(t, "/queues/mail.eu/purge?state=ready")
	if !strings.Contains(page.body, `pattern="mail\.eu"`) {
		t.Errorf("purge page of mail.eu lacks pattern=\"mail\\.eu\":\n%s", page.body)
	}
	for in, want := range map[string]string{"mail.eu": `mail\.eu`, "a-b_c": "a-b_c", `x^$\.*+?()[]{}|/`: `x\^\$\\\.\*\+\?\(\)\[\]\{\}\|\/`} {
		if got := patternLiteral(in); got != want {
			t.Errorf("patternLiteral(%q) = %q, want %q", in, got, want)
		}
	}
	if r := b.post(t, "/queues/mail.eu/purge", url.Values{"state": {"ready"}, "confirm": {"mailXeu"}}); r.status != 400 {
		t.Errorf("purge of mail.eu confirmed as mailXeu = %d, want 400", r.status)
	}
}

// TestEveryMatchConfirmed: an action on every match refuses a form without the count
// page's token for its count, and above ConfirmAbove without that count (or the queue's
// name) typed; the count page shows the count first, an upper bound when the count
// stops at CountLimit.
func TestEveryMatchConfirmed(t *testing.T) {
	b := setup(t, Options{ConfirmAbove: 3, CountLimit: 4, PageSize: 2})
	for i := range 7 {
		typ := "resize"
		if i == 0 { // the oldest: lists of dead jobs read the newest first
			typ = "email"
		}
		b.dead(t, typ, "x", "image too large")
	}
	// 7 dead, the first 4 read: up to 4 matches + 3 not read.
	var c matchCount
	b.getJSON(t, "/queues/default/matching?state=dead&do=retry&type=resize", &c)
	if c.Complete || c.Read != 4 || c.Matched != 4 || c.Count != 7 || !c.Typed {
		t.Fatalf("count = %+v, want 4 of the first 4 read, up to 7, typed", c)
	}
	page := b.get(t, "/queues/default/matching?state=dead&do=retry&type=resize")
	for _, want := range []string{`data-count="7"`, "up to <strong>7</strong>", `id="confirm"`, `pattern="7|default"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("count page lacks %s:\n%s", want, page.body)
		}
	}
	base := url.Values{"state": {"dead"}, "do": {"retry"}, "type": {"resize"}}
	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, x := range base {
			v[k] = x
		}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	other := b.h.token("default", matchForm{State: queue.StateDead, Do: "retry", Filter: filter{Type: "resize"}}, 2)
	for what, f := range map[string]url.Values{
		"no token":                       base,
		"no count":                       with("token", c.Token, "confirm", "7"),
		"a smaller count than confirmed": with("count", "2", "token", c.Token),
		"another filter's token":         with("type", "email", "count", "7", "token", c.Token, "confirm", "7"),
		"a forged token":                 with("count", "7", "token", forged(c.Token), "confirm", "7"),
		"nothing typed":                  with("count", "7", "token", c.Token),
		"a wrong count typed":            with("count", "7", "token", c.Token, "confirm", "6"),
		"a wrong name typed":             with("count", "7", "token", c.Token, "confirm", "defaul"),
		"the token of count 2, typed 7":  with("count", "7", "token", other, "confirm", "7"),
	} {
		if r := b.post(t, "/queues/default/matching", f); r.status != 400 || !strings.Contains(r.body, "confirm") {
			t.Errorf("POST matching with %s = %d %.200s, want 400 asking to confirm", what, r.status, r.body)
		}
	}
	if st, _ := b.client.StatsOf(context.Background(), "default"); st[0].Dead != 7 {
		t.Fatalf("%d dead after refused batches, want 7", st[0].Dead)
	}
	for _, typed := range []string{"7", "default"} {
		r := b.do(t, "POST", "/queues/default/matching", with("count", "7", "token", c.Token, "confirm", typed),
			map[string]string{"Accept": "application/json"})
		wantStatus(t, "POST matching confirmed with "+typed, r, 200)
	}
	// Up to ConfirmAbove, the token alone confirms (the page's button).
	b.getJSON(t, "/queues/default/matching?state=dead&do=delete&type=email", &c)
	if c.Count != 1 || !c.Complete || c.Typed {
		t.Fatalf("count of the email job = %+v, want 1, complete, not typed", c)
	}
	r := b.post(t, "/queues/default/matching", url.Values{"state": {"dead"}, "do": {"delete"}, "type": {"email"},
		"count": {"1"}, "token": {c.Token}})
	wantStatus(t, "POST matching of 1 job", r, http.StatusSeeOther)
	for path, want := range map[string]int{
		"/queues/default/matching?state=dead&do=retry":             400, // no filter
		"/queues/default/matching?state=dead&do=cancel&type=x":     400, // dead jobs are not cancelled
		"/queues/default/matching?state=nope&do=retry&type=x":      400,
		"/queues/bad%20name/matching?state=dead&do=retry&type=x":   400,
		"/queues/default/matching?state=dead&do=retry&type=%ff%fe": 400,
	} {
		if r := b.get(t, path); r.status != want {
			t.Errorf("GET %s = %d, want %d", path, r.status, want)
		}
	}
	t.Run("read-only", func(t *testing.T) {
		ro := setup(t, Options{ReadOnly: true})
		ro.dead(t, "resize", "x", "e")
		if page := ro.get(t, "/queues/default/matching?state=dead&do=retry&type=resize"); page.status != 200 ||
			strings.Contains(page.body, `id="match-form"`) || !strings.Contains(page.body, "read-only") {
			t.Errorf("read-only count page = %d, want the count without a form", page.status)
		}
	})
}

// TestEveryMatchRemovingFromReady: cancelling or deleting every matching ready job takes
// each job out of the list the batches page through, so the jobs behind move up; every
// match is reached all the same, in plain ready and in limit keys' lists, pages of 2
// and batches of 4 reads.
func TestEveryMatchRemovingFromReady(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   string
		opts []queue.Option
	}{
		{"cancel", "cancel", nil},
		{"delete", "delete", nil},
		{"cancel-keyed", "cancel", []queue.Option{queue.LimitKey("k1")}},
		{"delete-keyed", "delete", []queue.Option{queue.LimitKey("k2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, Options{PageSize: 2, ScanLimit: 4})
			var match, other []string
			for i := range 14 {
				// Runs of matches of different lengths: 1, 2, 3... between non-matches.
				if i%4 == 3 || i%5 == 0 {
					other = append(other, b.enqueue(t, "keep", "x", tc.opts...))
				} else {
					match = append(match, b.enqueue(t, "drop", "x", tc.opts...))
				}
			}
			var c matchCount
			b.getJSON(t, "/queues/default/matching?state=ready&do="+tc.do+"&type=drop", &c)
			if c.Count != int64(len(match)) || !c.Complete {
				t.Fatalf("count = %+v, want %d, complete", c, len(match))
			}
			form := url.Values{"state": {"ready"}, "do": {tc.do}, "type": {"drop"},
				"count": {strconv.FormatInt(c.Count, 10)}, "token": {c.Token}}
			if d, _ := b.everyMatch(t, form, 20); d.Changed != len(match) || d.Failed != 0 {
				t.Errorf("every match done: changed %d, failed %d; want %d, 0", d.Changed, d.Failed, len(match))
			}
			for _, id := range match {
				if got := b.state(t, "default", id); got == queue.StateReady {
					t.Errorf("matching job %s is still ready after %s of every match", id, tc.do)
				}
			}
			for _, id := range other {
				if got := b.state(t, "default", id); got != queue.StateReady {
					t.Errorf("job %s that does not match is %q, want ready", id, got)
				}
			}
		})
	}
}

// TestQueueActionOfUnknownQueue: a POST pause of a queue no job was ever enqueued on
// answered 303 and wrote its paused key. It is refused as jobs pause refuses it, and
// writes nothing.
func TestQueueActionOfUnknownQueue(t *testing.T) {
	b := setup(t, Options{})
	b.enqueue(t, "t", "x")
	for _, act := range []string{"pause", "resume", "retry-dead"} {
		r := b.post(t, "/queues/zzdashunknown/"+act, nil)
		if r.status != http.StatusNotFound || !strings.Contains(r.body, "no queue &#34;zzdashunknown&#34;") && !strings.Contains(r.body, `no queue "zzdashunknown"`) {
			t.Errorf("POST %s of an unknown queue = %d %.300s, want 404 no queue", act, r.status, r.body)
		}
	}
	keys, err := redistest.Client(t).Keys(context.Background(), "*zzdashunknown*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys of the unknown queue = %q, %v; want none", keys, err)
	}
	wantStatus(t, "POST pause of a known queue", b.post(t, "/queues/default/pause", nil), http.StatusSeeOther)
}

// Jobs and queues named "." and "..", which ID and queue checks accept, are reached from
// their links and acted on: the links write those segments %2E (a browser resolved
// /jobs/.. to the overview and /jobs/. to a 404 before).
func TestDotNamesReachable(t *testing.T) {
	b := setup(t, Options{})
	for _, q := range []string{"default", ".", ".."} {
		for _, id := range []string{".", ".."} {
			b.enqueue(t, "t", "x", queue.ID(id), queue.On(q))
		}
		page := b.get(t, "/queues/"+segment(q)+"?state=ready")
		wantStatus(t, "GET queue "+q, page, http.StatusOK)
		for _, id := range []string{".", ".."} {
			link := "/jobs/" + strings.Repeat("%2E", len(id)) + "?queue=" + url.QueryEscape(q)
			if !strings.Contains(page.body, `href="`+link+`"`) {
				t.Fatalf("queue %q page has no link %s to job %q", q, link, id)
			}
			job := b.get(t, link)
			wantStatus(t, "GET "+link, job, http.StatusOK)
			if !strings.Contains(job.body, `action="/jobs/`+strings.Repeat("%2E", len(id))+`/cancel"`) {
				t.Errorf("job %q of queue %q: page has no cancel form on its own path", id, q)
			}
			r := b.post(t, "/jobs/"+segment(id)+"/cancel", url.Values{"queue": {q}})
			wantStatus(t, "POST cancel "+id, r, http.StatusSeeOther)
			if got := b.state(t, q, id); got != queue.StateDead {
				t.Errorf("job %q of queue %q after cancel is %q, want dead", id, q, got)
			}
		}
	}
}

// forged is token with its first character changed: "x"+token[1:] was token itself when
// it began with an x, and the test then failed once in 64 runs.
func forged(token string) string {
	if strings.HasPrefix(token, "x") {
		return "y" + token[1:]
	}
	return "x" + token[1:]
}
