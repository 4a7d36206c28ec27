package browsertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// strictCSP is the policy the dashboard sends: no inline script, nothing from elsewhere.
const strictCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// fixture serves small pages under strictCSP, each showing one thing the harness must see.
func fixture(t *testing.T) *httptest.Server {
	page := func(head, body string) string {
		return `<!doctype html><html><head><meta charset="utf-8"><title>fixture</title>` +
			`<link rel="icon" href="data:,">` + head + `</head><body>` + body + `</body></html>`
	}
	pages := map[string]string{
		"/ok": page(`<script src="/app.js" defer></script>`,
			`<h1>Queues</h1><p id="status">loading</p><button id="more">more</button><p id="count">0</p>`),
		"/inline":  page(``, `<p id="status">inline</p><script>document.title = "ran"</script>`),
		"/console": page(`<script src="/console.js"></script>`, `<p>console</p>`),
		"/throw":   page(`<script src="/throw.js"></script>`, `<p>throw</p>`),
		"/missing": page(``, `<img src="/nope.png" alt="">`),
		"/badcss":  page(`<link rel="stylesheet" href="/nope.css">`, `<p>missing</p>`),
		"/blocked": page(``, `<img src="http://localhost:1/elsewhere.png" alt="">`),
		"/confirm": page(`<script src="/confirm.js" defer></script>`,
			`<button id="purge">purge</button><p id="result">none</p>`),
	}
	scripts := map[string]string{
		// Text that changes after the load event, as a live page's does.
		"/app.js": `document.getElementById("status").textContent = "ready";
			setTimeout(() => { document.getElementById("status").textContent = "live" }, 150);
			document.getElementById("more").addEventListener("click", () => {
				const c = document.getElementById("count"); c.textContent = String(Number(c.textContent) + 1) });`,
		"/console.js": `console.error("boom", 42)`,
		"/throw.js":   `throw new Error("kaboom")`,
		"/confirm.js": `document.getElementById("purge").addEventListener("click", () => {
				document.getElementById("result").textContent = confirm("Purge 3 jobs?") ? "confirmed" : "cancelled" });`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", strictCSP)
		if body, ok := pages[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, body)
			return
		}
		if body, ok := scripts[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, body)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestBrowser runs every page test on one browser, as a package's e2e tests do.
func TestBrowser(t *testing.T) {
	start := time.Now()
	b := New(t)
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	srv := fixture(t)

	t.Run("clean page passes", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		p := b.NewPage(t)
		t.Logf("a new page took %v", time.Since(start).Round(time.Millisecond))
		if code := p.Navigate(srv.URL + "/ok"); code != http.StatusOK {
			t.Fatalf("Navigate() = %d, want 200", code)
		}
		p.WaitText("#status", "live")
		if got := p.Text("h1"); got != "Queues" {
			t.Errorf("Text(h1) = %q, want Queues", got)
		}
		p.Click("#more")
		p.Click("#more")
		p.WaitText("#count", "2")
		if p.Exists("#nothing") || !p.Exists("#more") {
			t.Errorf("Exists(#nothing), Exists(#more) = %v, %v; want false, true", p.Exists("#nothing"), p.Exists("#more"))
		}
		if got := Eval[int](p, `1 + document.querySelectorAll("p").length`); got != 3 {
			t.Errorf("Eval() = %d, want 3", got)
		}
		p.ColorScheme("dark")
		if !Eval[bool](p, `matchMedia("(prefers-color-scheme: dark)").matches`) {
			t.Errorf("after ColorScheme(dark), the page does not see a dark scheme")
		}
		p.ColorScheme("")
		if png := p.Screenshot(); !slices.Equal(png[:8], []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("Screenshot() starts %q, want a PNG signature", png[:8])
		}
		if ps := p.Problems(); len(ps) != 0 {
			t.Errorf("Problems() = %v on a clean page, want none", ps)
		}
	})

	// Each page breaks one rule; the harness must report it with the right kind.
	for _, tc := range []struct {
		path, kind, text string
	}{
		{"/inline", KindCSP, "script-src"},
		{"/console", KindConsole, "boom 42"},
		{"/throw", KindException, "kaboom"},
		{"/missing", KindHTTP, "Image 404 Not Found"},
		{"/badcss", KindLog, "nope.css"},
		{"/blocked", KindCSP, "img-src"},
	} {
		t.Run("reports "+tc.path, func(t *testing.T) {
			t.Parallel()
			p := b.NewPage(t)
			p.Navigate(srv.URL + tc.path)
			var got []Problem
			match := func(pr Problem) bool { return pr.Kind == tc.kind && strings.Contains(pr.Text, tc.text) }
			// Reports arrive as events, some after the load event: wait for them.
			for deadline := time.Now().Add(ActionTimeout); !slices.ContainsFunc(got, match) && time.Now().Before(deadline); {
				time.Sleep(pollEvery)
				got = append(got, p.TakeProblems()...)
			}
			if !slices.ContainsFunc(got, match) {
				t.Fatalf("problems = %v, want one of kind %s holding %q", got, tc.kind, tc.text)
			}
			if tc.kind == KindCSP && Eval[string](p, "document.title") == "ran" {
				t.Errorf("the inline script ran despite the CSP")
			}
		})
	}

	t.Run("dialogs", func(t *testing.T) {
		t.Parallel()
		p := b.NewPage(t)
		p.Navigate(srv.URL + "/confirm")
		p.Click("#purge")
		p.WaitText("#result", "cancelled") // dismissed by default
		p.AcceptDialogs(true)
		p.Click("#purge")
		p.WaitText("#result", "confirmed")
		if got, want := p.Dialogs(), []string{"Purge 3 jobs?", "Purge 3 jobs?"}; !slices.Equal(got, want) {
			t.Errorf("Dialogs() = %q, want %q", got, want)
		}
	})

	t.Run("problems fail the test", func(t *testing.T) {
		t.Parallel()
		r := &recorder{TB: t}
		p := b.NewPage(r)
		r.run(func() {
			p.Navigate(srv.URL + "/console")
			p.WaitTrue(`document.querySelector("p") !== null`)
		})
		r.runCleanups()
		if !r.Failed() || !r.logged("the browser reported 1 problem(s)") || !r.logged("console.error: boom 42") {
			t.Errorf("after a console.error, the test failed = %v with %q; want a failure naming it", r.Failed(), r.msgs)
		}
		checkScreenshot(t, r)
	})

	t.Run("a tolerated problem is logged, the others still fail", func(t *testing.T) {
		t.Parallel()
		r := &recorder{TB: t}
		p := b.NewPage(r)
		p.Tolerate("a known defect", func(pr Problem) bool { return strings.Contains(pr.URL, "/nope.png") })
		r.run(func() {
			p.Navigate(srv.URL + "/missing")
			p.WaitTrue(`document.querySelector("img").complete`)
			p.Navigate(srv.URL + "/console")
		})
		r.runCleanups()
		var failure string
		for _, m := range r.msgs {
			if strings.HasPrefix(m, "the browser reported") {
				failure = m
			}
		}
		if !r.logged("tolerated (a known defect): http: Image 404 Not Found") || strings.Contains(failure, "nope.png") ||
			!strings.Contains(failure, "console.error: boom 42") || !r.Failed() {
			t.Errorf("failed = %v with %q; want the 404 tolerated and logged, the console.error failing", r.Failed(), r.msgs)
		}
		os.Remove(filepath.Join(ScreenshotDir(), fileName(r.Name())+".png"))
	})

	t.Run("a wait that times out fails the test", func(t *testing.T) {
		t.Parallel()
		r := &recorder{TB: t}
		p := b.NewPage(r)
		p.Navigate(srv.URL + "/ok")
		p.WaitText("#status", "live")
		p.Timeout = 300 * time.Millisecond
		start := time.Now()
		r.run(func() { p.WaitText("#status", "never") })
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("WaitText took %v with a 300ms timeout", took)
		}
		r.run(func() { p.Click("#absent") })
		r.run(func() { p.Text("#absent") })
		r.runCleanups()
		for _, want := range []string{
			`WaitText("#status", "never"): not within 300ms; its text is "live"`,
			`click #absent:`,
			`Text("#absent"): not within 300ms; no element matches`,
		} {
			if !r.logged(want) {
				t.Errorf("messages %q, want one holding %q", r.msgs, want)
			}
		}
		checkScreenshot(t, r)
	})
}

// checkScreenshot checks that r's failed page left its PNG, and removes it.
func checkScreenshot(t *testing.T, r *recorder) {
	t.Helper()
	path := filepath.Join(ScreenshotDir(), fileName(r.Name())+".png")
	png, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") || !r.logged(path) {
		t.Errorf("screenshot of the failed page: read %s: %v; logged %q", path, err, r.msgs)
	}
	os.Remove(path)
}

// TestNewWithoutChromium checks that a missing browser skips the test on a developer's
// machine and fails it in CI, naming the fix either way, and that a binary that is no
// browser fails the test.
func TestNewWithoutChromium(t *testing.T) {
	t.Setenv("JOBS_CHROMIUM", "/nonexistent/chromium")
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		r.run(func() { New(r) })
		if testing.Short() {
			t.Skip("New skips with -short before looking for a browser")
		}
		switch {
		case ci == "" && (!r.skipped || r.Failed()):
			t.Errorf("CI unset: skipped = %v, failed = %v; want a skip", r.skipped, r.Failed())
		case ci != "" && !r.Failed():
			t.Errorf("CI set: failed = %v; want a failure", r.Failed())
		}
		if !r.logged("JOBS_CHROMIUM=/nonexistent/chromium") {
			t.Errorf("CI=%q: messages %q, want the bad JOBS_CHROMIUM named", ci, r.msgs)
		}
	}

	// A binary that is no browser fails at once, naming it, rather than hanging.
	t.Setenv("JOBS_CHROMIUM", "true")
	r := &recorder{TB: t}
	start := time.Now()
	r.run(func() { New(r) })
	if !r.Failed() || !r.logged("browsertest: start ") || time.Since(start) > StartTimeout/2 {
		t.Errorf("New with JOBS_CHROMIUM=true: failed = %v after %v with %q; want a quick failure naming the start",
			r.Failed(), time.Since(start), r.msgs)
	}
}

// recorder is a testing.TB that records failures and skips instead of ending the test,
// so the harness's own failure paths can be checked. Its Fatal and Skip methods end
// the goroutine, so they run inside [recorder.run].
type recorder struct {
	testing.TB
	mu       sync.Mutex
	msgs     []string
	failed   bool
	skipped  bool
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Logf(format string, args ...any) { r.note(false, fmt.Sprintf(format, args...)) }

func (r *recorder) Errorf(format string, args ...any) { r.note(true, fmt.Sprintf(format, args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.note(true, fmt.Sprint(args...))
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	r.note(false, fmt.Sprint(args...))
	runtime.Goexit()
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	r.cleanups = append(r.cleanups, f)
	r.mu.Unlock()
}

func (r *recorder) note(fail bool, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
	r.failed = r.failed || fail
}

func (r *recorder) logged(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.msgs, func(m string) bool { return strings.Contains(m, sub) })
}

// run calls f on its own goroutine, so a Fatal or Skip ends only f.
func (r *recorder) run(f func()) {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	<-done
}

// runCleanups runs the registered cleanups, last first, as testing does.
func (r *recorder) runCleanups() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		r.run(fs[i])
	}
}
