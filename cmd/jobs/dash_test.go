package main

import (
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
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
		{[]string{"dash", "--listen", "nonsense"}, "want HOST:PORT"},
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
