package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ActionTimeout bounds each page action: a navigation, a click, a wait for text.
const ActionTimeout = 10 * time.Second

// pollEvery is how often a wait re-reads the page. The page is in-process and local, so
// a short interval costs little and keeps the tests fast.
const pollEvery = 20 * time.Millisecond

// Kinds of [Problem].
const (
	KindConsole   = "console.error" // console.error or a failed console.assert
	KindException = "exception"     // an uncaught exception or unhandled rejection
	KindLog       = "log"           // a browser log error, such as a stylesheet of the wrong type
	KindHTTP      = "http"          // a response with status 400 or more, or a load that failed
	KindCSP       = "csp"           // a Content-Security-Policy violation
)

// Problem is something a page reported that a correct page never does.
type Problem struct {
	Kind string // one of the Kind constants
	Text string
	URL  string // the page or resource it came from, when the browser says
}

func (pr Problem) String() string {
	if pr.URL == "" {
		return pr.Kind + ": " + pr.Text
	}
	return pr.Kind + ": " + pr.Text + " (" + pr.URL + ")"
}

// cspMarker starts the console.error that cspListener writes for each
// securitypolicyviolation event, so onEvent can tell it from the page's own errors.
const cspMarker = "browsertest securitypolicyviolation: "

// cspListener runs in every document before the page's scripts. DevTools injects it, so
// the page's CSP does not block it. Chromium also logs each violation, but the DOM event
// is the one that names the blocked directive and source, and it fires for report-only
// policies too.
var cspListener = `(() => {
	const report = console.error.bind(console);
	document.addEventListener("securitypolicyviolation", e => report(` + "`" + cspMarker +
	"${e.effectiveDirective} blocked ${e.blockedURI || \"inline\"} at ${e.sourceFile}:${e.lineNumber}`" + `));
})();`

// Page is one browser tab in its own browser context (cookies and storage not shared
// with other pages), opened for one test. Its methods fail the test on error or timeout.
type Page struct {
	// Timeout bounds each action and wait. Default: ActionTimeout. A test that expects
	// a wait to fail lowers it.
	Timeout time.Duration

	t      testing.TB
	ctx    context.Context
	cancel context.CancelFunc

	mu            sync.Mutex
	requests      map[network.RequestID]string // URL by request, to name a failed load
	problems      []Problem
	tolerated     []tolerance
	dialogs       []string
	acceptDialogs bool
}

// NewPage opens a tab for t. When t ends, the problems the page reported fail t, a
// screenshot is saved if t failed, and the tab is closed.
func (b *Browser) NewPage(t testing.TB) *Page {
	t.Helper()
	p := &Page{t: t, Timeout: ActionTimeout, requests: map[network.RequestID]string{}}
	p.ctx, p.cancel = chromedp.NewContext(b.ctx,
		chromedp.WithNewBrowserContext(), chromedp.WithListener(p.onEvent))
	// As with the browser, the first Do creates the tab and must not carry a timeout.
	created := make(chan error, 1)
	go func() { created <- chromedp.Do(p.ctx) }()
	select {
	case err := <-created:
		if err != nil {
			p.cancel()
			t.Fatalf("browsertest: open a tab: %v", err)
		}
	case <-time.After(ActionTimeout):
		p.cancel()
		t.Fatalf("browsertest: a new tab did not open within %v", ActionTimeout)
	}
	t.Cleanup(p.close)
	p.do("set up the tab",
		chromedp.EmulateViewport(1280, 900),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
				page.AddScriptToEvaluateOnNewDocumentParams{Source: cspListener})
			return err
		}))
	return p
}

func (p *Page) close() {
	defer p.cancel()
	// One round trip delivers every event the browser sent before it, so problems
	// reported just before the test ended are not missed.
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[int]("0"))
	cancel()
	var lines []string
	for _, pr := range p.TakeProblems() {
		if why := p.tolerance(pr); why != "" {
			p.t.Logf("browsertest: tolerated (%s): %v", why, pr)
			continue
		}
		lines = append(lines, "  "+pr.String())
	}
	if len(lines) > 0 {
		p.t.Errorf("the browser reported %d problem(s):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if p.t.Failed() {
		path := filepath.Join(ScreenshotDir(), fileName(p.t.Name())+".png")
		if err := p.saveScreenshot(path); err != nil {
			p.t.Logf("browsertest: no screenshot of the failed page: %v", err)
		} else {
			p.t.Logf("browsertest: screenshot of the failed page: %s", path)
		}
	}
}

// ScreenshotDir is where failed tests leave a PNG of their page: $JOBS_BROWSER_ARTIFACTS,
// or jobs-browsertest in the system's temporary directory.
func ScreenshotDir() string {
	if d := os.Getenv("JOBS_BROWSER_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "jobs-browsertest")
}

// fileName turns a test name ("TestE2E/retry") into a file name ("TestE2E_retry").
func fileName(testName string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, testName)
}

// onEvent runs on chromedp's reading goroutine: it must not block or run commands.
func (p *Page) onEvent(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		pr := Problem{Kind: KindConsole, Text: argsText(ev.Args)}
		if rest, ok := strings.CutPrefix(pr.Text, cspMarker); ok {
			pr = Problem{Kind: KindCSP, Text: rest}
		} else if st := ev.StackTrace; st != nil && len(st.CallFrames) > 0 {
			pr.URL = st.CallFrames[0].URL
		}
		p.add(pr)
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			desc, _, _ := strings.Cut(d.Exception.Description, "\n")
			text += " " + desc
		}
		p.add(Problem{Kind: KindException, Text: text, URL: d.URL})
	case *log.EventEntryAdded:
		e := ev.Entry
		isCSP := strings.Contains(e.Text, "Content Security Policy")
		if e.Level != log.EntryLevelError && !isCSP {
			return
		}
		kind := KindLog
		if isCSP {
			kind = KindCSP
		}
		p.add(Problem{Kind: kind, Text: e.Text, URL: e.URL})
	case *network.EventRequestWillBeSent:
		p.mu.Lock()
		p.requests[ev.RequestID] = ev.Request.URL
		p.mu.Unlock()
	case *network.EventLoadingFinished:
		p.mu.Lock()
		delete(p.requests, ev.RequestID)
		p.mu.Unlock()
	case *network.EventResponseReceived:
		if r := ev.Response; r.Status >= 400 {
			p.add(Problem{Kind: KindHTTP, Text: fmt.Sprintf("%s %d %s", ev.Type, r.Status, r.StatusText), URL: r.URL})
		}
	case *network.EventLoadingFailed:
		// A load the page gave up itself (leaving a page closes its event stream) is
		// no fault; one the browser refused or could not make is.
		if ev.Canceled && ev.BlockedReason == "" {
			return
		}
		p.mu.Lock()
		url := p.requests[ev.RequestID]
		delete(p.requests, ev.RequestID)
		p.mu.Unlock()
		pr := Problem{Kind: KindHTTP, Text: fmt.Sprintf("%s failed: %s", ev.Type, ev.ErrorText), URL: url}
		if ev.BlockedReason != "" {
			pr.Text += " (blocked: " + string(ev.BlockedReason) + ")"
			if ev.BlockedReason == network.BlockedReasonCsp {
				pr.Kind = KindCSP
			}
		}
		p.add(pr)
	case *page.EventJavascriptDialogOpening:
		p.mu.Lock()
		p.dialogs = append(p.dialogs, ev.Message)
		accept := p.acceptDialogs
		p.mu.Unlock()
		// A dialog blocks the page until answered; answering is a command, which this
		// goroutine must not send itself.
		go func() {
			ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
			defer cancel()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept})
		}()
	}
}

func (p *Page) add(pr Problem) {
	p.mu.Lock()
	p.problems = append(p.problems, pr)
	p.mu.Unlock()
}

// argsText renders console arguments as the DevTools console does, roughly: strings
// as they are, other values by their description.
func argsText(args []*runtime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		var s string
		switch {
		case a.Type == runtime.RemoteObjectTypeString && json.Unmarshal(a.Value, &s) == nil:
		case a.Description != "":
			s = a.Description
		case len(a.Value) > 0:
			s = string(a.Value)
		default:
			s = string(a.Type)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// Problems returns what the page has reported so far.
func (p *Page) Problems() []Problem {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Problem(nil), p.problems...)
}

// TakeProblems returns what the page has reported so far and forgets it, so a test that
// provokes a problem on purpose can check it without failing.
func (p *Page) TakeProblems() []Problem {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.problems
	p.problems = nil
	return ps
}

// tolerance is a known defect that a test tolerates rather than fails on.
type tolerance struct {
	why   string
	match func(Problem) bool
}

// Tolerate makes the problems that match a known defect, logged with why on every run
// rather than failing the test. It is for a defect tracked elsewhere: remove the call
// once it is fixed.
func (p *Page) Tolerate(why string, match func(Problem) bool) {
	p.mu.Lock()
	p.tolerated = append(p.tolerated, tolerance{why, match})
	p.mu.Unlock()
}

// tolerance returns why pr is tolerated, or "" when it is not.
func (p *Page) tolerance(pr Problem) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, tl := range p.tolerated {
		if tl.match(pr) {
			return tl.why
		}
	}
	return ""
}

// AcceptDialogs sets whether the page's alert, confirm and prompt dialogs are accepted
// (OK) or dismissed (Cancel), which is the default. Either way [Page.Dialogs] has their
// messages.
func (p *Page) AcceptDialogs(accept bool) {
	p.mu.Lock()
	p.acceptDialogs = accept
	p.mu.Unlock()
}

// Dialogs returns the messages of the dialogs the page opened so far.
func (p *Page) Dialogs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.dialogs...)
}

// do runs actions within p.Timeout and fails the test, naming what, on error.
func (p *Page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, p.Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browsertest: %s: %v", what, err)
	}
}

// Navigate loads url and waits for its load event. It returns the HTTP status of the
// document.
func (p *Page) Navigate(url string) int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, p.Timeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(url))
	if err != nil {
		p.t.Fatalf("browsertest: navigate to %s: %v", url, err)
	}
	if resp == nil {
		return 0
	}
	return int(resp.Status)
}

// Reload reloads the page and waits for its load event.
func (p *Page) Reload() {
	p.t.Helper()
	p.do("reload", chromedp.Reload())
}

// Click waits until the first element matching the CSS selector is visible and clicks
// it with the mouse, as a person would.
func (p *Page) Click(sel string) {
	p.t.Helper()
	p.do("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// Type waits until the element matching the CSS selector is visible, focuses it and
// types text into it key by key.
func (p *Page) Type(sel, text string) {
	p.t.Helper()
	p.do("type into "+sel, chromedp.SendKeys(chromedp.CSS(sel), text))
}

// ColorScheme makes the page see the system's colour scheme as "light" or "dark" (the
// prefers-color-scheme media feature); "" gives back the browser's own.
func (p *Page) ColorScheme(scheme string) {
	p.t.Helper()
	switch scheme {
	case "", "light", "dark":
	default:
		p.t.Fatalf("browsertest: ColorScheme(%q): want \"light\", \"dark\" or \"\"", scheme)
	}
	params := emulation.SetEmulatedMediaParams{}
	if scheme != "" {
		params.Features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	}
	p.do("emulate prefers-color-scheme "+scheme, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, params)
		return err
	}))
}

// Eval evaluates a JavaScript expression in the page and decodes its value into T.
func Eval[T any](p *Page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, p.Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("browsertest: evaluate %s: %v", expr, err)
	}
	return v
}

// element is what elementJS reports about a selector's first match.
type element struct {
	Found bool   `json:"found"`
	Text  string `json:"text"`
}

// elementJS is an expression giving the element type for the CSS selector sel.
func elementJS(sel string) string {
	q, _ := json.Marshal(sel)
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s);
		return e ? {found: true, text: e.innerText ?? e.textContent} : {found: false, text: ""}; })()`, q)
}

// poll evaluates expr until ok accepts its value or p.Timeout passes, across
// navigations (an evaluation that fails while a new document loads is tried again).
// It returns the last value read (seen is false if none was) and the last error.
func poll[T any](p *Page, expr string, ok func(T) bool) (last T, seen, accepted bool, lastErr error) {
	deadline := time.Now().Add(p.Timeout)
	for {
		ctx, cancel := context.WithDeadline(p.ctx, deadline)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
		cancel()
		if err == nil {
			last, seen = v, true
			if ok(v) {
				return v, true, true, nil
			}
		} else {
			lastErr = err
		}
		if !time.Now().Add(pollEvery).Before(deadline) || p.ctx.Err() != nil {
			return last, seen, false, lastErr
		}
		time.Sleep(pollEvery)
	}
}

// WaitText waits until the first element matching the CSS selector exists and its
// visible text contains want.
func (p *Page) WaitText(sel, want string) {
	p.t.Helper()
	last, seen, ok, err := poll(p, elementJS(sel), func(e element) bool { return e.Found && strings.Contains(e.Text, want) })
	if !ok {
		p.t.Fatalf("browsertest: WaitText(%q, %q): not within %v; %s", sel, want, p.Timeout, describe(last, seen, err))
	}
}

// WaitGone waits until no element matches the CSS selector.
func (p *Page) WaitGone(sel string) {
	p.t.Helper()
	last, seen, ok, err := poll(p, elementJS(sel), func(e element) bool { return !e.Found })
	if !ok {
		p.t.Fatalf("browsertest: WaitGone(%q): not within %v; %s", sel, p.Timeout, describe(last, seen, err))
	}
}

// WaitTrue waits until the JavaScript expression is true (truthy values do not count:
// write a comparison).
func (p *Page) WaitTrue(expr string) {
	p.t.Helper()
	_, _, ok, err := poll(p, "("+expr+") === true", func(b bool) bool { return b })
	if !ok {
		p.t.Fatalf("browsertest: WaitTrue(%s): still not true after %v (last error: %v)", expr, p.Timeout, err)
	}
}

// Text waits until an element matches the CSS selector and returns its visible text.
func (p *Page) Text(sel string) string {
	p.t.Helper()
	last, seen, ok, err := poll(p, elementJS(sel), func(e element) bool { return e.Found })
	if !ok {
		p.t.Fatalf("browsertest: Text(%q): not within %v; %s", sel, p.Timeout, describe(last, seen, err))
	}
	return last.Text
}

// Exists reports whether an element matches the CSS selector now, without waiting.
func (p *Page) Exists(sel string) bool {
	p.t.Helper()
	return Eval[element](p, elementJS(sel)).Found
}

// describe says what a failed wait last saw: the element's text, its absence, or the
// error that kept it from reading the page at all.
func describe(last element, seen bool, err error) string {
	switch {
	case !seen:
		return fmt.Sprintf("the page could not be read: %v", err)
	case !last.Found:
		return "no element matches"
	default:
		return fmt.Sprintf("its text is %q", last.Text)
	}
}

// Screenshot returns a PNG of the whole page, beyond the viewport.
func (p *Page) Screenshot() []byte {
	p.t.Helper()
	png, err := p.screenshot()
	if err != nil {
		p.t.Fatalf("browsertest: %v", err)
	}
	return png
}

// SaveScreenshot writes a PNG of the whole page to path, making its directory.
func (p *Page) SaveScreenshot(path string) {
	p.t.Helper()
	if err := p.saveScreenshot(path); err != nil {
		p.t.Fatalf("browsertest: %v", err)
	}
}

// screenshot and saveScreenshot return their errors, for use in cleanup, where the test
// may have ended.
func (p *Page) screenshot() ([]byte, error) {
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout) // not a wait: p.Timeout does not apply
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	return png, nil
}

func (p *Page) saveScreenshot(path string) error {
	png, err := p.screenshot()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
