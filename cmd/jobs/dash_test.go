package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	webdash "github.com/jobs-dev/jobs/dash"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

func TestDashRefusesBadUsage(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dash", "--listen", "0.0.0.0:7420"}, "not a loopback address: give --auth"},
		{[]string{"dash", "--listen", ":7420"}, "not a loopback address"},
		{[]string{"dash", "--listen", "192.0.2.1:7420"}, "not a loopback address"},
		{[]string{"dash", "--listen", "0.0.0.0:"}, "not a loopback address"},
		{[]string{"dash", "--listen", "[::]:7420"}, "not a loopback address"},
		{[]string{"dash", "--listen", ":"}, "not a loopback address"},
		{[]string{"dash", "--listen", "nonsense"}, "want HOST:PORT"},
		{[]string{"dash", "--listen", "127.0.0.1:99999"}, "want a number from 0 to 65535"},
		{[]string{"dash", "--listen", "127.0.0.1:99999", "--auth", "u:p"}, "want a number from 0 to 65535"},
		{[]string{"dash", "--auth", "nopass"}, "--auth: want USER:PASS"},
		{[]string{"dash", "--auth", ":pass"}, "--auth: want USER:PASS"},
		{[]string{"dash", "--auth", "user:"}, "--auth: want USER:PASS"},
		{[]string{"dash", "extra"}, "no arguments"},
		{[]string{"dash", "--listen", "127.0.0.1:0", "--base-path", "x/"}, "BasePath"},
	} {
		r := jobs(t, p, "", tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("jobs %v = %+v, want exit 2 and one line with %q", tc.args, r, tc.want)
		}
	}
}

var servingURL = regexp.MustCompile(`(?:serving|dashboard at) (http://[0-9.:]+/)`)

// dashURL waits for the child's stderr to name the dashboard's URL.
func dashURL(t *testing.T, errb *lockedBuffer) string {
	t.Helper()
	var url string
	waitFor(t, 10*time.Second, "the dashboard's URL on stderr", func() bool {
		m := servingURL.FindStringSubmatch(errb.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	return url
}

func get(t *testing.T, url, user, pass string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDashServesWithAuthFromEnv: JOBS_DASH_AUTH guards every page, and a non-loopback
// --listen is accepted with it.
func TestDashServesWithAuthFromEnv(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "JOBS_TEST_CHILD=jobs", "JOBS_DASH_AUTH=ops:s3cret", "JOBS_TEST_ARGS="+strings.Join(
		[]string{"--redis", "redis://" + srv.Addr, "--prefix", redistest.Prefix(t), "dash", "--listen", "0.0.0.0:0",
			"--read-only"}, "\x1f"))
	var out, errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := dashURL(t, &errb)
	if !strings.Contains(errb.String(), "(read-only)") {
		t.Errorf("jobs dash --read-only does not say so: %s", errb.String())
	}
	if code := get(t, url, "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET / without credentials = %d, want 401", code)
	}
	if code := get(t, url, "ops", "s3cret"); code != http.StatusOK {
		t.Errorf("GET / with JOBS_DASH_AUTH's credentials = %d, want 200", code)
	}
}

// TestDevServesDashboard: jobs dev prints the dashboard's URL, and it answers.
func TestDevServesDashboard(t *testing.T) {
	t.Parallel()
	_, _, errb := startJobs(t, "dev", "--addr", "127.0.0.1:0", "--dash", "127.0.0.1:0")
	url := dashURL(t, errb)
	if code := get(t, url, "", ""); code != http.StatusOK {
		t.Errorf("GET %s = %d, want 200", url, code)
	}
	if code := get(t, url+"workers", "", ""); code != http.StatusOK {
		t.Errorf("GET %sworkers = %d, want 200", url, code)
	}
}

// TestDashJSONMatchesCLI: the dashboard's JSON carries exactly the objects the CLI's
// --json prints: stats' queues, inspect's job, ls' jobs, workers' list, history's points.
func TestDashJSONMatchesCLI(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	srv := redistest.Shared(t)
	id := strings.TrimSpace(jobs(t, p, "", "enqueue", "--max-retry", "2", "email", `{"to":"ann"}`).stdout)
	jobs(t, p, "", "enqueue", "--delay", "1h", "later", "x")
	client, err := queue.NewClient(redis.NewClient(&redis.Options{Addr: srv.Addr}), queue.Config{Prefix: p})
	if err != nil {
		t.Fatal(err)
	}
	h, err := webdash.New(client, webdash.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) map[string]json.RawMessage {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Accept", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var m map[string]json.RawMessage
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &m) != nil {
			t.Fatalf("GET %s = %d %s", path, w.Code, w.Body)
		}
		return m
	}
	cli := func(args ...string) string {
		t.Helper()
		r := jobs(t, p, "", args...)
		if r.code != 0 {
			t.Fatalf("jobs %v = %+v", args, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	field := func(raw, name string) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return string(m[name])
	}
	noLatency := func(s string) string { return regexp.MustCompile(`"latency_ms":\d+`).ReplaceAllString(s, "") }
	for _, tc := range []struct{ what, dash, cli string }{
		{"stats --json queues", noLatency(string(get("/")["queues"])), noLatency(field(cli("stats", "--json"), "queues"))},
		{"inspect --json", string(get("/jobs/" + id + "?queue=default")["job"]), cli("inspect", "--json", id)},
		{"ls --json", string(get("/queues/default?state=ready")["jobs"]), cli("ls", "default", "--json")},
		{"ls --state scheduled --json", string(get("/queues/default?state=scheduled")["jobs"]),
			cli("ls", "default", "--state", "scheduled", "--json")},
		{"workers --json", string(get("/workers")["workers"]), field(cli("workers", "--json"), "workers")},
	} {
		if tc.dash != tc.cli {
			t.Errorf("%s:\ndash %s\ncli  %s", tc.what, tc.dash, tc.cli)
		}
	}
}

// TestDashListenLoopbackByIP: without --auth, only an address whose IP is loopback is
// served, a host name only when every address it resolves to is, and then on that IP.
func TestDashListenLoopbackByIP(t *testing.T) {
	names := map[string][]net.IPAddr{
		"loopback.test": {{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("::1")}},
		"mixed.test":    {{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("192.0.2.7")}},
		"public.test":   {{IP: net.ParseIP("192.0.2.7")}},
		"empty.test":    {},
	}
	real := lookupIPAddr
	lookupIPAddr = func(ctx context.Context, host string) ([]net.IPAddr, error) {
		if as, ok := names[host]; ok {
			return as, nil
		}
		return real(ctx, host)
	}
	t.Cleanup(func() { lookupIPAddr = real })
	for _, tc := range []struct {
		listen, want, refused string // want: the address served; refused: the error's words
	}{
		{"127.0.0.1:7420", "127.0.0.1:7420", ""},
		{"127.0.0.2:0", "127.0.0.2:0", ""},
		{"[::1]:7420", "[::1]:7420", ""},
		{"loopback.test:7420", "127.0.0.1:7420", ""},
		{"localhost:", "", ""}, // this machine's resolver: served on a loopback IP (checked below)
		{":7420", "", "no host: every interface"},
		{":", "", "no host: every interface"},
		{"0.0.0.0:", "", "is not a loopback address"},
		{"[::]:0", "", "is not a loopback address"},
		{"192.0.2.1:7420", "", "is not a loopback address"},
		{"mixed.test:7420", "", "mixed.test resolves to 192.0.2.7"},
		{"public.test:", "", "public.test resolves to 192.0.2.7"},
		{"empty.test:7420", "", "resolves to nothing"},
	} {
		var opts webdash.Options
		got, err := dashAuth(context.Background(), "", tc.listen, &opts)
		switch {
		case tc.refused != "":
			if err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "--auth") {
				t.Errorf("dashAuth(%q) = %q, %v; want refused with %q and a hint of --auth", tc.listen, got, err, tc.refused)
			}
		case err != nil:
			t.Errorf("dashAuth(%q) err = %v, want it served", tc.listen, err)
		case tc.want != "" && got != tc.want:
			t.Errorf("dashAuth(%q) = %q, want %q", tc.listen, got, tc.want)
		case tc.want == "":
			host, _, _ := net.SplitHostPort(got)
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				t.Errorf("dashAuth(%q) = %q, want a loopback IP", tc.listen, got)
			}
		}
		if opts.Authorize != nil {
			t.Errorf("dashAuth(%q) without --auth set an Authorize", tc.listen)
		}
	}
	// With --auth, any address is served as given.
	var opts webdash.Options
	if got, err := dashAuth(context.Background(), "ops:pw", "0.0.0.0:7420", &opts); err != nil || got != "0.0.0.0:7420" ||
		opts.Authorize == nil {
		t.Errorf("dashAuth(0.0.0.0:7420, --auth) = %q, %v (Authorize set: %v); want served with auth", got, err,
			opts.Authorize != nil)
	}
}
