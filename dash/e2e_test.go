package dash

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/internal/browsertest"
	"github.com/jobs-dev/jobs/jobstest"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// TestE2E drives the dashboard in a real headless Chromium, as an operator would: one
// browser for all its subtests, a fresh tab in its own browser context for each. Any
// console error, uncaught exception, failed load or Content-Security-Policy violation
// on any page a subtest opens fails that subtest (browsertest checks when it ends), and
// a failed subtest leaves a screenshot of its page in browsertest.ScreenshotDir().
//
// JOBS_SCREENSHOT=1 also writes the overview of the "chart draws" subtest to
// docs/dashboard.png, the picture in the README.
func TestE2E(t *testing.T) {
	br := browsertest.New(t)

	t.Run("overview counts move live, and stop while hidden", func(t *testing.T) {
		b := setup(t, Options{LiveEvery: 50 * time.Millisecond})
		b.enqueue(t, "email", `{"to":"a@example.com"}`)
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/")
		ready := `tr[data-queue="default"] td[data-count="ready"]`
		p.WaitText(ready, "1")
		eventually(t, "the page listens to /live", func() bool { return listeners(b) == 1 })
		b.enqueue(t, "email", `{"to":"b@example.com"}`)
		p.WaitText(ready, "2") // pushed over server-sent events: no reload
		if got := browsertest.Eval[string](p, `performance.getEntriesByType("navigation")[0].type`); got != "navigate" {
			t.Errorf("the page was loaded again (%s): want the count to move without a reload", got)
		}

		// The tab is hidden (as when the operator switches tabs): the page closes its
		// stream, so the server stops reading for it; shown again, it catches up.
		visible := func(v bool) {
			browsertest.Eval[bool](p, `Object.defineProperty(document, "hidden", {value: `+strconv.FormatBool(!v)+
				`, configurable: true}), document.dispatchEvent(new Event("visibilitychange")), true`)
		}
		visible(false)
		eventually(t, "the hidden page closes its stream", func() bool { return listeners(b) == 0 })
		b.enqueue(t, "email", `{"to":"c@example.com"}`)
		visible(true)
		p.WaitText(ready, "3")
		eventually(t, "the shown page listens again", func() bool { return listeners(b) == 1 })
	})

	t.Run("an open page says when it stops updating, and catches up", func(t *testing.T) {
		b, srv := setupOwnRedis(t, Options{LiveEvery: 50 * time.Millisecond, Timeout: 300 * time.Millisecond})
		b.enqueue(t, "email", `{}`)
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/")
		ready := `tr[data-queue="default"] td[data-count="ready"]`
		p.WaitText(ready, "1")
		srv.Kill()
		p.WaitTrue(`(document.querySelector("#stale") || {}).textContent.startsWith("Not updating since ")`)
		if got := p.Text("#stale"); !strings.Contains(got, "Redis cannot be read") {
			t.Errorf("banner %q, want it to say Redis cannot be read", got)
		}
		// Back (empty: it kept nothing on disk), the next snapshot takes the banner away.
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		p.WaitGone("#stale")
	})

	t.Run("retry a dead job", func(t *testing.T) {
		b := setup(t, Options{})
		id := b.enqueue(t, "resize", `{"w":640}`)
		drain(t, b.client, failType("resize", "image too large"), queue.DefaultQueue)
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/queues/default?state=dead")
		p.Click(`tr[data-job-id="` + id + `"] a`)
		p.WaitText("#job-state", "dead")
		p.WaitText("#last-error", "image too large")
		p.Click("#action-retry")
		p.WaitText("#job-state", "ready")
		if j, err := b.client.Get(context.Background(), queue.DefaultQueue, id); err != nil || j.State != queue.StateReady {
			t.Fatalf("after Retry in the browser, Get() = %+v, %v; want the job ready", j, err)
		}
	})

	t.Run("purge asks for confirmation", func(t *testing.T) {
		b := setup(t, Options{ConfirmAbove: 2})
		for i := range 3 {
			b.enqueue(t, "email", `{"n":`+strconv.Itoa(i)+`}`)
		}
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/queues/default?state=ready")
		p.Click("#purge")
		p.WaitText("#purge-count", "3")
		// The browser refuses to send the form until the queue's name is typed...
		p.Click("#purge-submit")
		if !browsertest.Eval[bool](p, `document.getElementById("confirm").matches(":invalid")`) {
			t.Errorf("the empty confirmation is not marked invalid")
		}
		// ...and the server refuses a wrong name from a page without that check.
		browsertest.Eval[bool](p, `(e => { e.removeAttribute("required"); e.removeAttribute("pattern"); return true })(
			document.getElementById("confirm"))`)
		p.Type("#confirm", "wrong")
		p.Click("#purge-submit")
		p.WaitText("#error", "confirm")
		p.TakeProblems() // the refusal's 400 is the point here
		if n := readyCount(t, b.client); n != 3 {
			t.Fatalf("after a purge with the wrong name, %d jobs ready, want 3", n)
		}
		p.Navigate(b.srv.URL + "/queues/default/purge?state=ready")
		p.Type("#confirm", "default")
		p.Click("#purge-submit")
		p.WaitText(`#states [data-count="ready"]`, "0")
		if n := readyCount(t, b.client); n != 0 {
			t.Fatalf("after the confirmed purge, %d jobs ready, want 0", n)
		}
	})

	t.Run("purge confirmation takes the queue's name literally", func(t *testing.T) {
		b := setup(t, Options{ConfirmAbove: 1})
		for range 2 {
			b.enqueue(t, "email", `{}`, queue.On("mail.eu"))
		}
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/queues/mail.eu/purge?state=ready")
		invalid := `document.getElementById("confirm").matches(":invalid")`
		p.Type("#confirm", "mailXeu") // "." as a regular expression would accept it
		if !browsertest.Eval[bool](p, invalid) {
			t.Errorf("confirm field accepts mailXeu for queue mail.eu")
		}
		browsertest.Eval[bool](p, `(document.getElementById("confirm").value = "", true)`)
		p.Type("#confirm", "mail.eu")
		if browsertest.Eval[bool](p, invalid) {
			t.Errorf("confirm field refuses the queue's own name, mail.eu")
		}
	})

	t.Run("retry the selected dead jobs", func(t *testing.T) {
		b := setup(t, Options{})
		var ids []string
		for i := range 3 {
			ids = append(ids, b.enqueue(t, "resize", `{"n":`+strconv.Itoa(i)+`}`))
		}
		drain(t, b.client, failType("resize", "image too large"), queue.DefaultQueue)
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/queues/default?state=dead")
		p.Click(`tr[data-job-id="` + ids[0] + `"] input[type="checkbox"]`)
		p.Click(`tr[data-job-id="` + ids[2] + `"] input[type="checkbox"]`)
		p.Click(`#selection button[value="retry"]`)
		p.WaitText(`#states [data-count="dead"]`, "1")
		for i, id := range ids {
			want := queue.StateReady
			if i == 1 {
				want = queue.StateDead
			}
			if j, err := b.client.Get(context.Background(), queue.DefaultQueue, id); err != nil || j.State != want {
				t.Errorf("job %d after retrying jobs 0 and 2: Get() = %+v, %v; want %s", i, j, err, want)
			}
		}
	})

	t.Run("retry every dead job matching a filter, in batches", func(t *testing.T) {
		b := setup(t, Options{PageSize: 2, ScanLimit: 2})
		for i := range 8 {
			typ := "resize"
			if i%4 == 3 {
				typ = "thumbnail"
			}
			b.enqueue(t, typ, `{"n":`+strconv.Itoa(i)+`}`)
		}
		drain(t, b.client, func(j *queue.Job) error { return worker.SkipRetry(errors.New("disk full")) }, queue.DefaultQueue)
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/queues/default?state=dead&type=resize")
		p.Click(`#matching button[value="retry"]`)
		// The count comes first: 6 of 8, at most 100, so a plain button confirms it.
		p.WaitText("#match-count", "6 of the 8 dead jobs match")
		if p.Exists("#confirm") {
			t.Errorf("the count page of 6 jobs asks for typing, want a plain button")
		}
		p.Click("#match-submit")
		// Each batch's page says how many jobs were read so far and offers the next.
		const done, readSoFar = `location.search.includes("done=matching")`,
			`Number(document.getElementById("matching-progress")?.dataset.read)`
		for read, batches := 0, 1; ; batches++ {
			p.WaitTrue(done + " || " + readSoFar + " > " + strconv.Itoa(read))
			if browsertest.Eval[bool](p, done) {
				break
			}
			if batches == 8 { // 8 dead jobs, 2 read per batch
				t.Fatalf("still not done after %d batches", batches)
			}
			read = browsertest.Eval[int](p, readSoFar)
			p.Click("#matching-continue")
		}
		st, err := b.client.StatsOf(context.Background(), queue.DefaultQueue)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Ready != 6 || st[0].Dead != 2 {
			t.Errorf("after retrying every dead resize job: %d ready, %d dead; want 6 ready (the resize jobs), 2 dead",
				st[0].Ready, st[0].Dead)
		}
	})

	t.Run("every match above the threshold needs its count typed", func(t *testing.T) {
		b := setup(t, Options{ConfirmAbove: 2})
		for i := range 3 {
			b.enqueue(t, "resize", `{"n":`+strconv.Itoa(i)+`}`)
		}
		drain(t, b.client, failType("resize", "disk full"), queue.DefaultQueue)
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/queues/default?state=dead&error=disk")
		p.Click(`#matching button[value="delete"]`)
		p.WaitText("#match-count", "3 of the 3 dead jobs match")
		p.Click("#match-submit") // nothing typed: the browser keeps the form
		if !browsertest.Eval[bool](p, `document.getElementById("confirm").matches(":invalid")`) {
			t.Errorf("the empty confirmation is not marked invalid")
		}
		p.Type("#confirm", "2") // not the count shown
		if !browsertest.Eval[bool](p, `document.getElementById("confirm").matches(":invalid")`) {
			t.Errorf("a wrong count typed is not marked invalid")
		}
		// The server refuses it too, from a page without the browser's check.
		browsertest.Eval[bool](p, `(e => { e.removeAttribute("required"); e.removeAttribute("pattern"); return true })(
			document.getElementById("confirm"))`)
		p.Click("#match-submit")
		p.WaitText("#error", "confirm")
		p.TakeProblems() // the refusal's 400 is the point here
		if st, err := b.client.StatsOf(context.Background(), queue.DefaultQueue); err != nil || st[0].Dead != 3 {
			t.Fatalf("after a wrong count typed: %+v, %v; want 3 dead", st, err)
		}
		p.Navigate(b.srv.URL + "/queues/default/matching?state=dead&do=delete&error=disk")
		p.Type("#confirm", "3")
		p.Click("#match-submit")
		p.WaitTrue(`location.search.includes("done=matching")`)
		if st, err := b.client.StatsOf(context.Background(), queue.DefaultQueue); err != nil || st[0].Dead != 0 {
			t.Fatalf("after the count typed: %+v, %v; want no dead job", st, err)
		}
	})

	t.Run("cron: add an entry, trigger it now, then remove it", func(t *testing.T) {
		b := setup(t, Options{})
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/cron")
		p.WaitText("#no-cron", "No dynamic entries")
		// A spec `jobs cron add` refuses is refused beside the form, what was typed kept.
		p.Type(`#cron-add input[name="name"]`, "nightly-report")
		p.Type(`#cron-add input[name="spec"]`, "0 25 * * *")
		p.Type(`#cron-add input[name="type"]`, "report")
		p.Click("#cron-add-submit")
		p.WaitText("#cron-form-error", "invalid entry nightly-report")
		p.TakeProblems() // the refusal's 400 is the point here
		if got := browsertest.Eval[string](p, `document.querySelector('#cron-add input[name="type"]').value`); got != "report" {
			t.Errorf("after the refusal the type field holds %q, want what was typed, report", got)
		}
		browsertest.Eval[bool](p, `(document.querySelector('#cron-add input[name="spec"]').value = "", true)`)
		p.Type(`#cron-add input[name="spec"]`, "0 3 * * *")
		p.Click("#cron-add-submit")
		p.WaitText("#notice", "added")
		row := `tr[data-entry="nightly-report"]`
		p.WaitText(row, "report")
		p.Click(row + ` button[data-action="trigger"]`)
		p.WaitText("#notice", "enqueued")
		if n := readyCount(t, b.client); n != 1 {
			t.Fatalf("after Trigger now, %d jobs ready, want 1", n)
		}
		p.WaitText(row+` td[data-cell="last-job"]`, "ready") // the triggered job, in its last job cell
		p.Click(row + ` button[data-action="remove"]`)
		p.WaitGone(row)
		if es, err := cron.NewStore(b.client).List(context.Background()); err != nil || len(es) != 0 {
			t.Fatalf("after Remove, List() = %v, %v; want no entry", es, err)
		}
	})

	t.Run("chart draws", func(t *testing.T) {
		b := setup(t, Options{})
		queues := []string{queue.DefaultQueue, "emails", "images"}
		for i := range 24 {
			q := queues[i%len(queues)]
			typ := map[string]string{queue.DefaultQueue: "report", "emails": "welcome", "images": "resize"}[q]
			if _, err := b.client.Enqueue(context.Background(), typ, []byte(`{"n":`+strconv.Itoa(i)+`}`), queue.On(q)); err != nil {
				t.Fatal(err)
			}
		}
		drain(t, b.client, failType("resize", "image too large"), queues...)
		for i := range 5 { // some waiting work, and a paused queue, for the picture
			b.enqueue(t, "report", `{"n":`+strconv.Itoa(i)+`}`)
		}
		if err := b.client.Pause(context.Background(), queue.DefaultQueue); err != nil {
			t.Fatal(err)
		}
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/")
		p.WaitTrue(`document.querySelector("#chart canvas") !== null`)
		// Count the canvas's painted pixels: uPlot draws the axes, grid and both series.
		painted := browsertest.Eval[int](p, `(() => {
			const c = document.querySelector("#chart canvas");
			const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
			let n = 0;
			for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) n++;
			return n; })()`)
		if painted < 1000 {
			t.Errorf("the chart's canvas has %d painted pixels, want a drawn chart", painted)
		}
		// Nothing is drawn in the canvas's last 3 pixel columns: a label cut at its right
		// edge (the last x-axis label, centred on the plot's last tick) would be.
		edge := browsertest.Eval[int](p, `(() => {
			const c = document.querySelector("#chart canvas");
			const px = c.getContext("2d").getImageData(c.width - 3, 0, 3, c.height).data;
			let n = 0;
			for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) n++;
			return n; })()`)
		if edge != 0 {
			t.Errorf("%d pixels painted in the chart's last 3 columns: a label is cut at its right edge", edge)
		}
		// Each queue's name is on one line, even in a narrow window (the page squeezed to
		// 700px); each reason it is not moving on its own.
		if wrapped := browsertest.Eval[[]string](p, `(() => {
			const main = document.querySelector("main"), was = main.style.maxWidth;
			main.style.maxWidth = "700px";
			const out = [...document.querySelectorAll("#queues td.qname a")]
				.filter(a => a.getClientRects().length !== 1).map(a => a.textContent);
			main.style.maxWidth = was;
			return out; })()`); len(wrapped) != 0 {
			t.Errorf("queue names wrapped over lines: %q", wrapped)
		}
		tops := browsertest.Eval[[]float64](p, `[...document.querySelectorAll('tr[data-queue="default"] td.why li')]
			.map(li => li.getBoundingClientRect().top)`)
		if len(tops) != 2 || tops[0] == tops[1] {
			t.Errorf("the paused queue without workers lists its reasons at tops %v, want 2 on lines of their own", tops)
		}
		if os.Getenv("JOBS_SCREENSHOT") != "" {
			p.SaveScreenshot(filepath.Join("..", "docs", "dashboard.png"))
		}
	})

	t.Run("stop a worker from the workers page", func(t *testing.T) {
		b := setup(t, Options{})
		id := b.enqueue(t, "transcode", `{}`)
		started := make(chan struct{})
		w, err := worker.New(b.client, worker.Config{Beat: 100 * time.Millisecond, ShutdownTimeout: 100 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(testLog{t}, nil)),
			Handler: worker.HandlerFunc(func(ctx context.Context, _ *queue.Job) error {
				close(started)
				<-ctx.Done() // runs until the worker stops
				return ctx.Err()
			})})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var runErr error
		stopped := make(chan struct{})
		go func() { runErr = w.Run(ctx); close(stopped) }()
		t.Cleanup(func() { cancel(); <-stopped }) // no worker logging after the test
		select {
		case <-started:
		case <-time.After(browsertest.ActionTimeout):
			t.Fatalf("the worker did not start the job within %v", browsertest.ActionTimeout)
		}
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/workers")
		// The worker's first beat may land just after the page was read: read it again.
		p.WaitTrue(`document.querySelector("tr[data-running]") !== null ||
			(document.dispatchEvent(new Event("visibilitychange")), false)`)
		p.WaitText(`tr[data-running="`+id+`"]`, "transcode")
		p.Click(`button[data-action="stop"]`)
		select {
		case <-stopped:
			if runErr != nil {
				t.Fatalf("after Stop in the browser, Run() = %v, want nil", runErr)
			}
		case <-time.After(browsertest.ActionTimeout):
			t.Fatalf("the worker did not stop within %v of pressing Stop", browsertest.ActionTimeout)
		}
		p.Navigate(b.srv.URL + "/workers")
		p.WaitText("#no-workers", "No live workers")
	})

	t.Run("mounted under a base path", func(t *testing.T) {
		b := setup(t, Options{BasePath: "/admin/jobs"})
		id := b.enqueue(t, "email", `{"to":"a@example.com"}`)
		p := newPage(t, br)
		// Every link, form and asset must stay under the base path: one that does not is
		// a 404 here, which fails the test.
		p.Navigate(b.srv.URL + "/admin/jobs/")
		p.WaitTrue(`document.querySelector("#chart canvas") !== null`)
		p.Click(`tr[data-queue="default"] td[data-count="ready"] a`)
		p.Click(`tr[data-job-id="` + id + `"] a`)
		p.WaitText("#job-state", "ready")
		p.Click(`a[href$="/workers"]`)
		p.WaitText("h1", "Workers")
		if got := browsertest.Eval[string](p, "location.pathname"); got != "/admin/jobs/workers" {
			t.Errorf("the workers link led to %s, want /admin/jobs/workers", got)
		}
	})

	t.Run("dark mode follows the system", func(t *testing.T) {
		b := setup(t, Options{})
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/")
		bg := `getComputedStyle(document.body).backgroundColor`
		p.ColorScheme("light")
		light := browsertest.Eval[string](p, bg)
		p.ColorScheme("dark")
		if dark := browsertest.Eval[string](p, bg); dark == light {
			t.Errorf("body background is %s in both light and dark schemes", dark)
		}
	})

	t.Run("a batch's counts and a dependent job's graph", func(t *testing.T) {
		b := setup(t, Options{})
		ref, _, err := b.client.NewBatch(context.Background(), queue.BatchOptions{OnSuccess: &queue.Callback{Type: "report"}},
			[]queue.BatchJob{{Type: "row"}, {Type: "row"}, {Type: "row"}})
		if err != nil {
			t.Fatal(err)
		}
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/jobs/" + ref.ID + ".1?queue=default")
		p.Click(`#batch a`) // the job page links its batch
		p.WaitText("#batch-id", ref.ID)
		for count, want := range map[string]string{"total": "3", "pending": "3", "done": "0", "dead": "0"} {
			if got := p.Text(`[data-count="` + count + `"]`); got != want {
				t.Errorf("batch page's %s count = %q, want %s", count, got, want)
			}
		}
		if got := p.Text(`[data-callback="success"] td`); got != "report: not fired" {
			t.Errorf("success callback shown as %q", got)
		}

		dep := b.enqueue(t, "charge", `{}`)
		id := b.enqueue(t, "ship", `{}`, queue.After(dep))
		p.Navigate(b.srv.URL + "/jobs/" + id + "?queue=default")
		p.WaitText(`[data-dependency="default/`+dep+`"] .state`, "ready")
		p.WaitText("#graph-self .state", "waiting")
		// Laid out by the stylesheet: upstream left of the job, the job left of downstream.
		if !browsertest.Eval[bool](p, `(() => { const x = s => document.querySelector(s).getBoundingClientRect().left;
			return x("#graph-up") < x("#graph-self") && x("#graph-self") < x("#graph-down"); })()`) {
			t.Errorf("the graph's columns are not laid out left to right")
		}
		p.Click(`[data-dependency="default/` + dep + `"] a`)
		p.WaitText(`[data-dependent="default/`+id+`"] .state`, "waiting")
	})

	t.Run("jobs under a limit key are ready: counted, listed with their key, acted on", func(t *testing.T) {
		b := setup(t, Options{})
		plain := b.enqueue(t, "email", `{}`)
		keyed := b.enqueue(t, "email", `{}`, queue.LimitKey("cust:A"))
		other := b.enqueue(t, "email", `{}`, queue.LimitKey("cust:B"))
		p := newPage(t, br)
		p.Navigate(b.srv.URL + "/")
		p.WaitText(`tr[data-queue="default"] td[data-count="ready"]`, "3")
		p.Navigate(b.srv.URL + "/queues/default?state=ready")
		p.WaitText(`#states [data-count="ready"]`, "3")
		p.WaitText(`tr[data-job-id="`+keyed+`"] td[data-limit-key]`, "cust:A")
		p.WaitText(`tr[data-job-id="`+plain+`"] td[data-limit-key]`, "-")
		p.Click(`tr[data-job-id="` + other + `"] input[type="checkbox"]`)
		p.Click(`#selection button[value="cancel"]`)
		p.WaitText(`#states [data-count="ready"]`, "2")
		if got := b.state(t, queue.DefaultQueue, other); got != queue.StateDead {
			t.Errorf("keyed job cancelled in the browser is %q, want dead", got)
		}
		p.Navigate(b.srv.URL + "/queues/default/purge?state=ready")
		p.WaitText("#purge-count", "2")
		p.Click("#purge-submit")
		p.WaitText(`#states [data-count="ready"]`, "0")
		if st, err := b.client.StatsOf(context.Background(), queue.DefaultQueue); err != nil || st[0].KeysWaiting != 0 {
			t.Errorf("after the purge, StatsOf() = %+v, %v; want no key waiting", st, err)
		}
	})

	t.Run("every page shows hostile input as text", func(t *testing.T) {
		b := setup(t, Options{})
		// What a job's author controls: its type (no spaces allowed), payload and error.
		const typ, payload, failure = `<img/src=x/onerror=alert(1)>`, `{"html":"<script>alert(2)</script>"}`,
			"<script>alert(3)</script>\x1b[31m"
		id := b.enqueue(t, typ, payload)
		drain(t, b.client, failType(typ, failure), queue.DefaultQueue)
		b.enqueue(t, typ, payload)
		p := newPage(t, br)
		for _, path := range []string{"/", "/queues/default?state=dead", "/queues/default?state=ready",
			"/queues/default?state=dead&type=img", "/workers", "/audit", "/events", "/events?type=img", "/cron",
			"/queues/default/purge?state=dead", "/queues/default/matching?state=dead&do=retry&type=img",
			"/jobs/" + id + "?queue=default"} {
			p.Navigate(b.srv.URL + path)
		}
		if got := p.Text(`[data-field="type"]`); got != typ {
			t.Errorf("job type shown as %q, want the text %q", got, typ)
		}
		p.WaitText("#payload", "<script>alert(2)</script>")
		p.WaitText("#last-error", "<script>alert(3)</script>")
		if d := p.Dialogs(); len(d) != 0 {
			t.Errorf("dialogs opened: %q; hostile input ran as script", d)
		}
	})
}

// newPage opens a tab for one subtest. Every problem on its pages fails the subtest.
func newPage(t *testing.T, br *browsertest.Browser) *browsertest.Page {
	t.Helper()
	return br.NewPage(t)
}

// failType is a handler outcome: jobs of type typ fail for good (they go dead) with
// the error text msg; the others succeed.
func failType(typ, msg string) func(*queue.Job) error {
	return func(j *queue.Job) error {
		if j.Type == typ {
			return worker.SkipRetry(errors.New(msg))
		}
		return nil
	}
}

// drain runs a worker over the queues until none has a job ready or running, each job
// ending as outcome says.
func drain(t *testing.T, c *queue.Client, outcome func(*queue.Job) error, queues ...string) {
	t.Helper()
	weights := map[string]int{}
	for _, q := range queues {
		weights[q] = 1
	}
	jobstest.Drain(t, c, worker.Config{
		Handler:         worker.HandlerFunc(func(_ context.Context, j *queue.Job) error { return outcome(j) }),
		Queues:          weights,
		ShutdownTimeout: time.Second,
	})
}

// listeners is how many open streams of /live the dashboard is serving.
func listeners(b *bundle) int {
	b.h.hub.mu.Lock()
	defer b.h.hub.mu.Unlock()
	return len(b.h.hub.subs)
}

// eventually waits until cond holds, failing the test after browsertest.ActionTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(browsertest.ActionTimeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", browsertest.ActionTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testLog writes a worker's log lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func readyCount(t *testing.T, c *queue.Client) int64 {
	t.Helper()
	st, err := c.StatsOf(context.Background(), queue.DefaultQueue)
	if err != nil {
		t.Fatalf("StatsOf() err = %v", err)
	}
	return st[0].Ready
}
