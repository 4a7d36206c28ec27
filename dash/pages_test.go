package dash

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

func TestOverviewShowsQueues(t *testing.T) {
	b := setup(t, Options{})
	b.enqueue(t, "email", `{"to":"a@b.c"}`)
	r := b.get(t, "/")
	wantStatus(t, "GET /", r, 200)
	for _, want := range []string{`data-queue="default"`, `<div id="chart"`,
		`<script type="application/json" id="chart-data">{"t":[`, `data-count="ready"><a href="/queues/default?state=ready">1</a>`,
		`data-redis="version">` + redisVersion(t, b)} {
		if !strings.Contains(r.body, want) {
			t.Errorf("GET / has no %s:\n%s", want, r.body)
		}
	}
	if !strings.Contains(r.body, "no live worker claims from this queue") {
		t.Errorf("GET / does not say why default's job is not moving:\n%s", r.body)
	}
	var d struct {
		Queues []struct {
			Name  string `json:"name"`
			Ready int    `json:"ready"`
		} `json:"queues"`
		Throughput []spanTotal          `json:"throughput"`
		Redis      map[string]any       `json:"redis"`
		Stuck      map[string][]string  `json:"stuck"`
		Chart      map[string][]float64 `json:"chart"`
	}
	b.getJSON(t, "/", &d)
	if len(d.Queues) != 1 || d.Queues[0].Name != "default" || d.Queues[0].Ready != 1 {
		t.Errorf("GET / JSON queues = %+v, want default with 1 ready", d.Queues)
	}
	if len(d.Throughput) != 3 || d.Throughput[0].Span != "1h" || d.Throughput[2].Span != "7d" {
		t.Errorf("GET / JSON throughput = %+v, want the spans 1h, 24h, 7d", d.Throughput)
	}
	if d.Redis["maxmemory_policy"] == "" || d.Redis["redis_version"] == "" {
		t.Errorf("GET / JSON redis = %v, want version and policy", d.Redis)
	}
	if len(d.Stuck["default"]) == 0 || len(d.Chart["t"]) != 60 {
		t.Errorf("GET / JSON stuck = %v, chart has %d minutes; want default stuck, 60 minutes", d.Stuck, len(d.Chart["t"]))
	}
}

func redisVersion(t *testing.T, b *bundle) string {
	info, err := b.client.ServerInfo(context.Background())
	if err != nil || info.Version == "" {
		t.Fatalf("ServerInfo() = %+v, %v", info, err)
	}
	return info.Version
}

// TestOverviewEmpty: no queue yet is a page that says so, and JSON with empty lists.
func TestOverviewEmpty(t *testing.T) {
	b := setup(t, Options{})
	if r := b.get(t, "/"); !strings.Contains(r.body, `id="no-queues"`) {
		t.Errorf("GET / with no queue lacks the no-queues line:\n%s", r.body)
	}
	r := b.do(t, "GET", "/", nil, map[string]string{"Accept": "application/json"})
	if !strings.Contains(r.body, `"queues":[]`) {
		t.Errorf("GET / JSON with no queue = %s, want \"queues\":[]", r.body)
	}
}

// TestOverviewThroughputShared: the metrics history is read once per SnapshotEvery and
// shared, so a flush between two requests shows only after the period.
func TestOverviewThroughputShared(t *testing.T) {
	b := setup(t, Options{SnapshotEvery: time.Hour})
	b.enqueue(t, "t", "x")
	var first overviewData
	b.getJSON(t, "/", &first)
	b.h.mu.Lock()
	at := b.h.snap.at
	b.h.mu.Unlock()
	var second overviewData
	b.getJSON(t, "/", &second)
	b.h.mu.Lock()
	defer b.h.mu.Unlock()
	if !b.h.snap.at.Equal(at) {
		t.Errorf("second overview read the history again (snapshot at %v, then %v), want it shared", at, b.h.snap.at)
	}
}

// TestOverviewThroughputRefreshed: a stale snapshot is served at once and read again in
// the background; the daily counters give the 7d figure.
func TestOverviewThroughputRefreshed(t *testing.T) {
	b := setup(t, Options{SnapshotEvery: time.Millisecond})
	var first overviewData
	b.getJSON(t, "/", &first)
	if first.Throughput[2].Processed != 0 {
		t.Fatalf("7d processed = %d before any job, want 0", first.Throughput[2].Processed)
	}
	b.dead(t, "t", "x", "boom") // one attempt ended, failed: the daily counters count it
	time.Sleep(5 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var d overviewData
		b.getJSON(t, "/", &d)
		if d.Throughput[2].Processed == 1 && d.Throughput[2].Failed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("7d throughput = %+v after 5s, want 1 processed, 1 failed", d.Throughput[2])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestQueuePageStatesAndJSON(t *testing.T) {
	b := setup(t, Options{})
	ready := b.enqueue(t, "email", `{"n":1}`)
	sched := b.enqueue(t, "later", "x", queue.Delay(time.Hour))
	b.enqueue(t, "after", "x", queue.AfterJob("default", sched))
	b.enqueue(t, "after", "y", queue.AfterJob("default", sched))
	// Each tab counts its own state: the waiting tab once showed the done count.
	r := b.get(t, "/queues/default")
	for _, want := range []string{`data-count="waiting">2<`, `data-count="done">0<`, `data-count="ready">1<`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("queue page lacks %s", want)
		}
	}
	for _, tc := range []struct {
		state, want, notWant string
	}{
		{"", ready, sched},
		{"ready", ready, sched},
		{"scheduled", sched, ready},
		{"dead", `id="no-jobs"`, ready},
	} {
		r := b.get(t, "/queues/default?state="+tc.state)
		wantStatus(t, "GET /queues/default?state="+tc.state, r, 200)
		if !strings.Contains(r.body, tc.want) || strings.Contains(r.body, tc.notWant) {
			t.Errorf("state %q: page has %s = %v, %s = %v; want only the first", tc.state, tc.want,
				strings.Contains(r.body, tc.want), tc.notWant, strings.Contains(r.body, tc.notWant))
		}
	}
	var d struct {
		Queue string `json:"queue"`
		State string `json:"state"`
		Jobs  []struct {
			ID    string `json:"id"`
			Type  string `json:"type"`
			State string `json:"state"`
		} `json:"jobs"`
		Next    string `json:"next"`
		Scanned int    `json:"scanned"`
	}
	b.getJSON(t, "/queues/default?state=scheduled", &d)
	if d.Queue != "default" || d.State != "scheduled" || len(d.Jobs) != 1 || d.Jobs[0].ID != sched ||
		d.Jobs[0].Type != "later" || d.Next != "" || d.Scanned != 1 {
		t.Errorf("GET /queues/default?state=scheduled JSON = %+v, want the one scheduled job, no next page", d)
	}
}

// TestQueuePagination walks every state's pages, as a browser follows the next link,
// and finds each job exactly once.
func TestQueuePagination(t *testing.T) {
	b := setup(t, Options{PageSize: 7})
	ctx := context.Background()
	want := map[queue.State]map[string]bool{queue.StateReady: {}, queue.StateScheduled: {}, queue.StateDead: {}}
	for range 9 { // first, while each is the only ready job
		want[queue.StateDead][b.dead(t, "d", "x", "boom")] = true
	}
	for i := range 23 {
		want[queue.StateReady][b.enqueue(t, "r", "x")] = true
		// Equal due times: the pages must still split ties by ID.
		id, err := b.client.Enqueue(ctx, "s", nil, queue.At(time.Unix(2e9, 0)), queue.ID("s"+string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		want[queue.StateScheduled][id] = true
	}
	for st, ids := range want {
		seen := map[string]bool{}
		path := "/queues/default?state=" + string(st)
		for pages := 0; path != ""; pages++ {
			if pages > 10 {
				t.Fatalf("%s: more than 10 pages", st)
			}
			var d listJSON
			b.getJSON(t, path, &d)
			if len(d.Jobs) > 7 {
				t.Errorf("%s page of %d jobs, want at most 7", st, len(d.Jobs))
			}
			for _, j := range d.Jobs {
				if seen[j.ID] {
					t.Errorf("%s: job %s on two pages", st, j.ID)
				}
				seen[j.ID] = true
			}
			path = ""
			if d.Next != "" {
				path = "/queues/default?state=" + string(st) + "&cursor=" + url.QueryEscape(d.Next)
			}
		}
		for id := range ids {
			if !seen[id] {
				t.Errorf("%s: job %s on no page", st, id)
			}
		}
	}
}

func TestQueueFilterIsBounded(t *testing.T) {
	b := setup(t, Options{PageSize: 5, ScanLimit: 10})
	var match []string
	for i := range 30 {
		typ, payload := "other", `{"user":"bob"}`
		if i%10 == 9 {
			typ, payload = "Email", `{"user":"alice"}`
		}
		id := b.enqueue(t, typ, payload)
		if typ == "Email" {
			match = append(match, id)
		}
	}
	var d listJSON
	b.getJSON(t, "/queues/default?state=ready&type=email", &d)
	// Claim order is oldest first: the first 10 read hold one match.
	if d.Scanned != 10 || len(d.Jobs) != 1 || d.Jobs[0].ID != match[0] || d.Next == "" {
		t.Fatalf("filtered page = scanned %d, %d jobs, next %q; want 10 scanned, the first match, a next cursor",
			d.Scanned, len(d.Jobs), d.Next)
	}
	r := b.get(t, "/queues/default?state=ready&type=email")
	if !strings.Contains(r.body, "Continue scanning") || !strings.Contains(r.body, `data-scanned="10"`) {
		t.Errorf("filtered page does not say what it scanned or offer to continue:\n%s", r.body)
	}
	var all []string
	path := "/queues/default?state=ready&type=email"
	for path != "" {
		var p listJSON
		b.getJSON(t, path, &p)
		for _, j := range p.Jobs {
			all = append(all, j.ID)
		}
		path = ""
		if p.Next != "" {
			path = "/queues/default?state=ready&type=email&cursor=" + url.QueryEscape(p.Next)
		}
	}
	if strings.Join(all, ",") != strings.Join(match, ",") {
		t.Errorf("continued scan found %v, want %v", all, match)
	}
	b.getJSON(t, "/queues/default?state=ready&payload=alice", &d)
	if len(d.Jobs) != 1 {
		t.Errorf("payload filter found %d jobs in the first 10, want 1", len(d.Jobs))
	}
}

func TestQueueFilterByError(t *testing.T) {
	b := setup(t, Options{})
	b.dead(t, "t", "x", "disk full")
	other := b.dead(t, "t", "x", "timeout")
	var d listJSON
	b.getJSON(t, "/queues/default?state=dead&error=TIMEOUT", &d)
	if len(d.Jobs) != 1 || d.Jobs[0].ID != other {
		t.Errorf("error filter = %v, want only %s", d.Jobs, other)
	}
}

func TestJobPage(t *testing.T) {
	b := setup(t, Options{})
	id := b.enqueue(t, "email", `{"to":"a@b.c","n":[1,2]}`, queue.Unique(time.Hour), queue.Exclusive("mail"))
	r := b.get(t, "/jobs/"+id+"?queue=default")
	wantStatus(t, "GET /jobs/ID", r, 200)
	for _, want := range []string{
		`id="job-state" data-state="ready"`,
		"{\n  &#34;to&#34;: &#34;a@b.c&#34;,", // pretty JSON, as text
		`data-field="unique">` + b.client.Config().Prefix + ":{default}:unique:email:", "held by " + id,
		`data-field="exclusive">mail: lock free`,
		"jobs inspect --queue default " + id,
		`id="action-cancel"`, `id="action-delete"`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("job page lacks %q:\n%s", want, r.body)
		}
	}
	// Without ?queue= it is found in any queue.
	wantStatus(t, "GET /jobs/ID without queue", b.get(t, "/jobs/"+id), 200)
	var d struct {
		Job struct {
			ID      string `json:"id"`
			Payload string `json:"payload"`
		} `json:"job"`
		UniqueKey    string   `json:"unique_key"`
		UniqueHolder string   `json:"unique_holder"`
		CLI          []string `json:"cli"`
	}
	b.getJSON(t, "/jobs/"+id+"?queue=default", &d)
	if d.Job.ID != id || d.Job.Payload != `{"to":"a@b.c","n":[1,2]}` || d.UniqueHolder != id || len(d.CLI) == 0 {
		t.Errorf("job JSON = %+v, want the job, its payload as given and its unique key's holder", d)
	}
}

func TestJobPageDeadShowsAttemptsAndTTL(t *testing.T) {
	b := setup(t, Options{})
	id := b.dead(t, "t", string([]byte{0xff, 0x00, 'a'}), "boom: disk full")
	r := b.get(t, "/jobs/"+id+"?queue=default")
	for _, want := range []string{`data-outcome="dead"`, "boom: disk full", `data-kind="hex"`,
		"00000000  ff 00 61", `id="action-retry"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("dead job page lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, "never (while not done or dead)") {
		t.Errorf("dead job page shows no TTL")
	}
}

func TestWorkersPage(t *testing.T) {
	b := setup(t, Options{})
	b.register(t, "host:42:abc")
	r := b.get(t, "/workers")
	wantStatus(t, "GET /workers", r, 200)
	if !strings.Contains(r.body, `data-process="host:42:abc"`) || !strings.Contains(r.body, `action="/workers/host:42:abc/quiet"`) {
		t.Errorf("workers page lacks the process or its quiet button:\n%s", r.body)
	}
	var d struct {
		Workers []queue.Process `json:"workers"`
	}
	b.getJSON(t, "/workers", &d)
	if len(d.Workers) != 1 || d.Workers[0].ID != "host:42:abc" {
		t.Errorf("workers JSON = %+v, want host:42:abc", d.Workers)
	}
}

func TestNotFoundAndBadInput(t *testing.T) {
	b := setup(t, Options{})
	b.enqueue(t, "t", "x")
	for _, tc := range []struct {
		path string
		code int
		msg  string
	}{
		{"/nope", 404, "no page /nope"},
		{"/queues/nope", 404, "no queue"},
		{"/queues/default?state=bogus", 400, `state &#34;bogus&#34;`},
		{"/queues/default?cursor=abc&state=dead", 400, "cursor"},
		{"/queues/default?cursor=-1", 400, "cursor"},
		{"/queues/" + url.PathEscape("a b") + "", 400, "queue name"},
		{"/queues/default?type=" + strings.Repeat("x", 201), 400, "at most 200"},
		{"/queues/default?type=%ff", 400, "UTF-8"},
		{"/jobs/nope?queue=default", 404, "not found"},
		{"/jobs/nope", 404, "not found"},
		{"/jobs/x?queue=" + url.QueryEscape("<b>"), 400, "queue name"},
		{"/audit?before=xyz", 400, "audit cursor"},
		{"/queues/default/purge?state=active", 400, "cancel them"},
		{"/static/", 404, ""},
	} {
		r := b.get(t, tc.path)
		if r.status != tc.code || !strings.Contains(r.body, tc.msg) {
			t.Errorf("GET %s = %d, body has %q: %v; want %d", tc.path, r.status, tc.msg,
				strings.Contains(r.body, tc.msg), tc.code)
		}
		j := b.do(t, "GET", tc.path, nil, map[string]string{"Accept": "application/json"})
		if tc.path != "/static/" && (j.status != tc.code || !strings.HasPrefix(j.body, `{"error":`)) {
			t.Errorf("GET %s (JSON) = %d %s, want %d {\"error\":...}", tc.path, j.status, j.body, tc.code)
		}
	}
	for _, p := range []string{"/jobs/x/retry", "/queues/default/pause", "/workers/w/stop"} {
		if r := b.get(t, p); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "POST" {
			t.Errorf("GET %s = %d, Allow %q; want 405, POST", p, r.status, r.header.Get("Allow"))
		}
	}
}

func TestStaticAssets(t *testing.T) {
	b := setup(t, Options{})
	for path, ct := range map[string]string{"/static/dash.css": "text/css", "/static/dash.js": "text/javascript"} {
		r := b.get(t, path)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), ct) {
			t.Errorf("GET %s = %d %s, want 200 %s", path, r.status, r.header.Get("Content-Type"), ct)
		}
	}
}

func TestBasePath(t *testing.T) {
	b := setup(t, Options{BasePath: "/admin/jobs"})
	b.enqueue(t, "t", "x")
	mux := http.NewServeMux()
	mux.Handle("/admin/jobs/", b.h)
	r := b.get(t, "/admin/jobs/")
	if r.status != 200 || !strings.Contains(r.body, `href="/admin/jobs/queues/default"`) ||
		!strings.Contains(r.body, `href="/admin/jobs/static/dash.css"`) {
		t.Errorf("GET /admin/jobs/ = %d, want links under the base path:\n%s", r.status, r.body)
	}
	if r := b.get(t, "/admin/jobs"); r.status != http.StatusMovedPermanently {
		t.Errorf("GET /admin/jobs = %d, want a redirect to /admin/jobs/", r.status)
	}
	for _, p := range []string{"/", "/admin/jobsx/", "/queues/default"} {
		if r := b.get(t, p); r.status != 404 {
			t.Errorf("GET %s outside the base path = %d, want 404", p, r.status)
		}
	}
	r = b.post(t, "/admin/jobs/queues/default/pause", nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/admin/jobs/queues/default?done=pause" {
		t.Errorf("POST pause under base path = %d Location %q", r.status, r.header.Get("Location"))
	}
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{{BasePath: "admin"}, {BasePath: "/admin/"}, {BasePath: "/a b"}, {Timeout: -1},
		{PageSize: queue.MaxPage + 1}, {ScanLimit: -1}, {ConfirmAbove: -1}, {SnapshotEvery: -1}} {
		if _, err := New(&queue.Client{}, o); err == nil || !strings.HasPrefix(err.Error(), "dash: ") {
			t.Errorf("New(%+v) err = %v, want a dash: error naming the field", o, err)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil) err = nil, want an error")
	}
}

// listJSON is the queue page's JSON as a client reads it.
type listJSON struct {
	Jobs []struct {
		ID string `json:"id"`
	} `json:"jobs"`
	Next    string `json:"next"`
	Scanned int    `json:"scanned"`
}

// TestJobPageSaysWhyNotMoving: a ready job of a paused queue that no worker serves, and
// a job whose exclusive lock is held, say so.
func TestJobPageSaysWhyNotMoving(t *testing.T) {
	b := setup(t, Options{})
	ctx := context.Background()
	id := b.enqueue(t, "t", "x", queue.Exclusive("k"))
	if err := b.client.Pause(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Why []string `json:"why"`
	}
	b.getJSON(t, "/jobs/"+id+"?queue=default", &d)
	if strings.Join(d.Why, "|") != "its queue is paused|no live worker claims from queue default" {
		t.Errorf("why = %q, want paused and no worker", d.Why)
	}
	// A worker for the queue but another type.
	p := &queue.Process{ID: "w1", Kind: queue.KindWorker, Queues: map[string]int{"default": 1}, Types: []string{"other"},
		State: queue.ProcessRunning}
	if _, _, err := brokerOf(b).Register(ctx, p, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.client.Resume(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	sched := b.enqueue(t, "t", "x", queue.Delay(time.Hour))
	b.getJSON(t, "/jobs/"+sched+"?queue=default", &d)
	if len(d.Why) != 2 || !strings.HasPrefix(d.Why[0], "waits for its run time, in ") ||
		d.Why[1] != "no live worker claiming from its queue has a handler for its type" {
		t.Errorf("why = %q, want its run time and no handler for its type", d.Why)
	}
	if r := b.get(t, "/jobs/"+sched+"?queue=default"); !strings.Contains(r.body, "Not moving: waits for its run time") {
		t.Errorf("job page does not say why it waits:\n%s", r.body)
	}
}

// TestRedisDown: with Redis unreachable every page answers at once with one line naming
// the failure (502), and actions too; nothing hangs past Options.Timeout.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr
	srv.Stop()
	c, err := queue.NewClient(redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1}), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(c, Options{Timeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/queues/default", "/jobs/x?queue=default", "/workers", "/audit", "/events", "/cron"} {
		start := time.Now()
		w := serve(h, p, true)
		if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), `{"error":"redis: `) ||
			strings.Count(w.Body.String(), "\n") != 1 || time.Since(start) > 2*time.Second {
			t.Errorf("GET %s with Redis down = %d %q in %s, want 502 with one line", p, w.Code, w.Body, time.Since(start))
		}
	}
}
