package dash

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"html/template"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/queue"
)

// TestWhyLimited: a queue whose ready jobs wait on its concurrency or rate limit says
// which, and until when, on the overview, the queue page and the waiting job's page.
func TestWhyLimited(t *testing.T) {
	for _, tc := range []struct {
		kind    queue.LimitKind
		limit   queue.Limit
		want    string
		jobWant string // on the waiting job's page: as jobs inspect says it
	}{
		{queue.ConcurrencyLimit, queue.Limit{Concurrency: 1}, "limited: as many of its jobs run as its concurrency limit allows; the next may start at ",
			"held back by the queue's concurrency limit (concurrency 1, 1 running) until "},
		{queue.RateLimit, queue.Limit{Rate: 1, Period: time.Hour}, "limited: its rate limit is reached; the next may start at ",
			"held back by the queue's rate limit (rate 1/1h0m0s burst 1, 1 running) until "},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			b := setup(t, Options{})
			ctx := context.Background()
			if err := b.client.SetLimit(ctx, "default", tc.limit); err != nil {
				t.Fatal(err)
			}
			first := b.enqueue(t, "t", "1")
			waiting := b.enqueue(t, "t", "2")
			jobs, err := brokerOf(b).Claim(ctx, "default", 1, time.Minute, "w1")
			if err != nil || len(jobs) != 1 || jobs[0].ID != first {
				t.Fatalf("Claim() = %v, %v; want the first job", jobs, err)
			}
			var o overviewData
			b.getJSON(t, "/", &o)
			why := strings.Join(o.Stuck["default"], "|")
			if !strings.Contains(why, tc.want) || !strings.Contains(why, "(in ") {
				t.Errorf("overview: stuck = %q, want %q and how long", why, tc.want)
			}
			if tc.kind == queue.RateLimit && !strings.Contains(why, "(in 1h0m0s)") && !strings.Contains(why, "(in 59m") {
				t.Errorf("overview: stuck = %q, want the next token in about an hour", why)
			}
			var l struct {
				Stuck []string `json:"stuck"`
			}
			b.getJSON(t, "/queues/default", &l)
			if !strings.Contains(strings.Join(l.Stuck, "|"), tc.want) {
				t.Errorf("queue page: stuck = %q, want %q", l.Stuck, tc.want)
			}
			var j struct {
				Why       []string `json:"why"`
				WaitingOn string   `json:"waiting_on"`
			}
			b.getJSON(t, "/jobs/"+waiting+"?queue=default", &j)
			if !strings.Contains(strings.Join(j.Why, "|"), tc.jobWant) || j.WaitingOn != string(tc.kind) {
				t.Errorf("job page: why = %q, waiting_on %q; want %q, %s", j.Why, j.WaitingOn, tc.jobWant, tc.kind)
			}
			// One reason per list item on the overview.
			page := b.get(t, "/")
			if !strings.Contains(page.body, "<li>no live worker claims from this queue</li><li>"+tc.want) {
				t.Errorf("overview does not list the reasons one per item:\n%s", page.body)
			}
			if err := b.client.RemoveLimit(ctx, "default"); err != nil {
				t.Fatal(err)
			}
			b.getJSON(t, "/", &o)
			if strings.Contains(strings.Join(o.Stuck["default"], "|"), "limited") {
				t.Errorf("after RemoveLimit, stuck = %q, want no limit named", o.Stuck["default"])
			}
		})
	}
}

// TestWhyKeyLimited: a job held back by its limit key's limit says so on its page, with
// the key (as `jobs inspect` does), and its JSON names the limit.
func TestWhyKeyLimited(t *testing.T) {
	b := setup(t, Options{})
	ctx := context.Background()
	if err := b.client.SetLimit(ctx, "default", queue.Limit{KeyConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, "t", "1", queue.LimitKey("cust:1"))
	waiting := b.enqueue(t, "t", "2", queue.LimitKey("cust:1"))
	if jobs, err := brokerOf(b).Claim(ctx, "default", 5, time.Minute, "w1"); err != nil || len(jobs) != 1 {
		t.Fatalf("Claim() = %v, %v; want the key's first job", jobs, err)
	}
	var j struct {
		Why          []string  `json:"why"`
		WaitingOn    string    `json:"waiting_on"`
		WaitingUntil time.Time `json:"waiting_until"`
	}
	b.getJSON(t, "/jobs/"+waiting+"?queue=default", &j)
	want := `held back by its limit key "cust:1" (key concurrency, 1 running) until `
	if !strings.Contains(strings.Join(j.Why, "|"), want) || j.WaitingOn != "key concurrency" ||
		time.Until(j.WaitingUntil) < 50*time.Second {
		t.Errorf("job page: why %q, waiting_on %q until %v; want %q, key concurrency, about the lease away",
			j.Why, j.WaitingOn, j.WaitingUntil, want)
	}
	if j.WaitingUntil.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("waiting_until %v, want whole milliseconds (a key's due time is in µs)", j.WaitingUntil)
	}
	if page := b.get(t, "/jobs/"+waiting+"?queue=default"); !strings.Contains(page.body, `data-field="limit-key">cust:1<`) {
		t.Errorf("job page does not show the limit key:\n%s", page.body)
	}
}

// TestAgesByRedisClock: the dashboard's host clock is two hours ahead; the ages the pages
// show are still right, being judged by Redis's clock: a running job's elapsed time, its
// unexpired lease, a scheduled job's wait, a cron entry's last tick not missed.
func TestAgesByRedisClock(t *testing.T) {
	b := setup(t, Options{})
	b.h.hostNow = func() time.Time { return time.Now().Add(2 * time.Hour) }
	ctx := context.Background()
	running := b.enqueue(t, "transcode", "x")
	if jobs, err := brokerOf(b).Claim(ctx, "default", 1, time.Minute, "w1"); err != nil || len(jobs) != 1 {
		t.Fatalf("Claim() = %v, %v", jobs, err)
	}
	p := &queue.Process{ID: "w1", Kind: queue.KindWorker, Queues: map[string]int{"default": 1}, State: queue.ProcessRunning}
	if _, _, err := brokerOf(b).Register(ctx, p, time.Minute); err != nil {
		t.Fatal(err)
	}
	page := b.get(t, "/workers")
	i := strings.Index(page.body, `data-running="`+running+`"`)
	if i < 0 {
		t.Fatalf("workers page does not show job %s running:\n%s", running, page.body)
	}
	row, _, _ := strings.Cut(page.body[i:], "</tr>")
	if !strings.Contains(row, "on default for ") || strings.Contains(row, "for 2h") || strings.Contains(row, "for 1h") {
		t.Errorf("running row %q: want its elapsed time by Redis's clock (seconds), not the host's", row)
	}
	var j struct {
		Why []string `json:"why"`
	}
	b.getJSON(t, "/jobs/"+running+"?queue=default", &j)
	if len(j.Why) != 0 {
		t.Errorf("running job with a fresh lease: why = %q, want nothing (no expired lease)", j.Why)
	}
	sched := b.enqueue(t, "t", "x", queue.Delay(3*time.Hour))
	b.getJSON(t, "/jobs/"+sched+"?queue=default", &j)
	if len(j.Why) == 0 || !strings.HasPrefix(j.Why[0], "waits for its run time, in 3h") &&
		!strings.HasPrefix(j.Why[0], "waits for its run time, in 2h59m") {
		t.Errorf("job due in 3h: why = %q, want it waiting about 3h by Redis's clock", j.Why)
	}
	store := cron.NewStore(b.client)
	if err := store.Add(ctx, cron.Entry{Name: "often", Spec: "@every 1m", Type: "t"}); err != nil {
		t.Fatal(err)
	}
	if r := b.post(t, "/cron/often/trigger", nil); r.status != 303 {
		t.Fatalf("trigger = %d %s", r.status, r.body)
	}
	var c cronData
	b.getJSON(t, "/cron", &c)
	if len(c.Entries) != 1 || c.Entries[0].Missed {
		t.Errorf("cron entries = %+v, want one just triggered, not flagged missed", c.Entries)
	}
}

// TestNoHostClockInJudgements: the dashboard's code reads this server's clock only
// through Handler.hostNow (a skewed host must not show wrong ages: TestAgesByRedisClock),
// which is set once, in New.
func TestNoHostClockInJudgements(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" ||
				sel.Sel.Name == "Until") {
				pos := fset.Position(sel.Pos())
				line := strings.Split(string(src), "\n")[pos.Line-1]
				if !strings.Contains(line, "hostNow: time.Now") {
					t.Errorf("%s: time.%s: judge ages by Redis's clock (redisNow), or this server's own caches by hostNow",
						pos, sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// TestCronTriggerShowsLastJob: after Trigger now, the entry's row names the triggered job
// and its state.
func TestCronTriggerShowsLastJob(t *testing.T) {
	b := setup(t, Options{})
	if err := cron.NewStore(b.client).Add(context.Background(), cron.Entry{Name: "nightly", Spec: "0 3 * * *",
		Type: "report", Queue: "reports"}); err != nil {
		t.Fatal(err)
	}
	r := b.do(t, "POST", "/cron/nightly/trigger", url.Values{}, map[string]string{"Accept": "application/json"})
	wantStatus(t, "trigger", r, 200)
	var c cronData
	b.getJSON(t, "/cron", &c)
	if len(c.Entries) != 1 || c.Entries[0].LastJob == "" || c.Entries[0].LastJobState != queue.StateReady ||
		c.Entries[0].LastTick == nil {
		t.Fatalf("cron after trigger = %+v, want its last job, ready, and its tick", c.Entries)
	}
	if b.state(t, "reports", c.Entries[0].LastJob) != queue.StateReady {
		t.Errorf("last job %s is not the triggered job ready on reports", c.Entries[0].LastJob)
	}
	page := b.get(t, "/cron")
	if !strings.Contains(page.body, ">"+c.Entries[0].LastJob+"</a> ready") {
		t.Errorf("cron page does not show the triggered job in its last job cell:\n%s", page.body)
	}
}

// TestCronAdd: the cron page adds an entry by the rules of `jobs cron add`; a refused
// one is shown again, with why beside the form and what was typed kept, as a 400.
func TestCronAdd(t *testing.T) {
	b := setup(t, Options{})
	if page := b.get(t, "/cron"); !strings.Contains(page.body, `<form method="post" action="/cron" id="cron-add"`) {
		t.Fatalf("cron page lacks the add form:\n%s", page.body)
	}
	r := b.post(t, "/cron", url.Values{"name": {"nightly"}, "spec": {"0 3 * * *"}, "type": {"report"}, "queue": {"reports"},
		"max_retry": {"2"}, "timeout": {"5m"}, "exclusive": {"1"}, "payload": {`{"full":true}`}})
	wantStatus(t, "POST /cron", r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/cron?done=cron-add" {
		t.Errorf("POST /cron redirects to %q, want /cron?done=cron-add", loc)
	}
	es, err := cron.NewStore(b.client).List(context.Background())
	if err != nil || len(es) != 1 {
		t.Fatalf("List() = %+v, %v; want the entry added", es, err)
	}
	if e := es[0]; e.Name != "nightly" || e.Spec != "0 3 * * *" || e.Type != "report" || e.Queue != "reports" ||
		e.MaxRetry == nil || *e.MaxRetry != 2 || e.Timeout != 5*time.Minute || !e.Exclusive || e.CatchUp ||
		e.Payload != `{"full":true}` {
		t.Errorf("entry = %+v, want the form's fields", e)
	}
	if page := b.get(t, "/cron"); !strings.Contains(page.body, `data-cell="words">at 03:00, every day<`) {
		t.Errorf("cron page does not say the spec in words:\n%s", page.body)
	}
	var a auditData
	b.getJSON(t, "/audit", &a)
	if len(a.Entries) == 0 || a.Entries[0].Action != "cron-add" || a.Entries[0].Target != "nightly" {
		t.Errorf("audit = %+v, want cron-add nightly first", a.Entries)
	}
	good := url.Values{"name": {"hourly"}, "spec": {"@hourly"}, "type": {"sync"}}
	for _, tc := range []struct {
		field, value, want string
	}{
		{"spec", "61 * * * *", "invalid entry hourly: cron spec"},
		{"spec", "", "invalid entry hourly: cron spec"},
		{"name", "a:b", "invalid entry: name"},
		{"name", "", "invalid entry: name"},
		{"type", "two words", "job type"},
		{"queue", "bad queue", "queue name"},
		{"max_retry", "many", `max retry "many": want a whole number`},
		{"max_retry", "-1", "max retry -1 is negative"},
		{"timeout", "soon", `timeout "soon"`},
		{"timeout", "-5s", `timeout "-5s"`},
		{"payload", strings.Repeat("x", 70<<10), "form"}, // over the form's 64 KiB
	} {
		f := url.Values{}
		for k, v := range good {
			f[k] = v
		}
		f.Set(tc.field, tc.value)
		r := b.post(t, "/cron", f)
		if r.status != 400 || !strings.Contains(r.body, template.HTMLEscapeString(tc.want)) {
			t.Errorf("POST /cron with %s=%.20q = %d, want 400 with %q; %.300s", tc.field, tc.value, r.status, tc.want, r.body)
			continue
		}
		if tc.want == "form" {
			continue
		}
		if !strings.Contains(r.body, `id="cron-form-error"`) || !strings.Contains(r.body, `id="cron"`) {
			t.Errorf("POST /cron with %s=%q: the refusal is not shown beside the form on the cron page", tc.field, tc.value)
		}
		if tc.value != "" && !strings.Contains(r.body, `value="`+template.HTMLEscapeString(tc.value)+`"`) {
			t.Errorf("POST /cron with %s=%q: the value typed is not kept in the form", tc.field, tc.value)
		}
		j := b.do(t, "POST", "/cron", f, map[string]string{"Accept": "application/json"})
		if j.status != 400 || !strings.HasPrefix(j.body, `{"error":`) {
			t.Errorf("POST /cron (JSON) with %s=%q = %d %s, want 400 and an error", tc.field, tc.value, j.status, j.body)
		}
	}
	if es, _ := cron.NewStore(b.client).List(context.Background()); len(es) != 1 {
		t.Errorf("after refused adds, %d entries, want 1", len(es))
	}
}
