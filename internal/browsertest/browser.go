// Package browsertest drives a real headless Chromium for end-to-end tests of web pages,
// through the DevTools protocol (github.com/chromedp/chromedp): no WebDriver, no browser
// download, only the system's `chromium` (Debian's package; `.ci/ensure-chromium` installs
// it in CI).
//
// A test starts one [Browser] and opens a [Page], a fresh tab in its own browser context
// (no cookies or storage shared), per subtest:
//
//	b := browsertest.New(t)
//	t.Run("overview", func(t *testing.T) {
//		t.Parallel()
//		p := b.NewPage(t)
//		p.Navigate(srv.URL)
//		p.WaitText("h1", "Queues")
//	})
//
// Every console.error, uncaught exception, browser log error (a failed asset load, for
// one) and Content-Security-Policy violation on a page fails its test when the test ends,
// unless the test took them with [Page.TakeProblems]. When a test fails, a PNG of its page
// is saved (see [ScreenshotDir]) and its path logged.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// StartTimeout bounds how long Chromium may take to start and answer.
const StartTimeout = 30 * time.Second

// binaries are the names Chromium is installed under: Debian's `chromium`, Ubuntu's and
// Fedora's `chromium-browser`, then Google's builds.
var binaries = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// ErrNoChromium is returned by [FindChromium] when no browser is on PATH.
var ErrNoChromium = errors.New("browsertest: no chromium, chromium-browser or google-chrome on PATH " +
	"(Debian/Ubuntu: apt-get install chromium)")

// FindChromium returns the path of the first Chromium found on PATH, or ErrNoChromium.
// JOBS_CHROMIUM, when set, names the binary to use instead.
func FindChromium() (string, error) {
	if p := os.Getenv("JOBS_CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("browsertest: JOBS_CHROMIUM=%s: %w", p, err)
		}
		return path, nil
	}
	for _, name := range binaries {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", ErrNoChromium
}

// Browser is one headless Chromium process, shared by the pages of a test and its
// subtests: starting it costs about a second, a new tab a few milliseconds.
type Browser struct {
	ctx    context.Context // the browser's first tab; pages are new tabs beside it
	cancel context.CancelFunc
}

// New starts headless Chromium for t and its subtests and stops it when t ends. With
// no browser installed it skips t, except under CI (env CI set), where a missing
// browser fails it: CI installs one, so its absence is a broken install, not a choice.
// With -short it skips t.
func New(t testing.TB) *Browser {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests skipped with -short")
	}
	path, err := FindChromium()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: CI must install it (.ci/ensure-chromium)", err)
		}
		t.Skip(err)
	}
	b, err := start(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	return b
}

func start(path string) (*Browser, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.DisableGPU,
		// The tests reach only loopback servers: keep Chromium from calling home.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("dns-prefetch-disable", true),
		chromedp.WindowSize(1280, 900),
		// Tabs share two renderer processes instead of one each: on a 2-core machine the
		// e2e tests run about a quarter faster, and each tab keeps its own browser context.
		chromedp.Flag("renderer-process-limit", "2"),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &Browser{ctx: ctx, cancel: func() { cancel(); allocCancel() }}

	// The first Do starts the process; its context must outlive the browser (a timeout
	// on it would stop the browser), so the start is bounded from outside instead.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			b.cancel()
			return nil, fmt.Errorf("browsertest: start %s: %w", path, err)
		}
	case <-time.After(StartTimeout):
		b.cancel()
		return nil, fmt.Errorf("browsertest: %s did not start within %v", path, StartTimeout)
	}
	return b, nil
}

// close stops the browser; the allocator's cancel waits for the process to exit and
// removes its temporary profile.
func (b *Browser) close() { b.cancel() }
