package main

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
)

func TestMetricsAddr(t *testing.T) {
	for in, want := range map[string]string{"9090": "127.0.0.1:9090", ":9090": "127.0.0.1:9090",
		"0.0.0.0:9090": "0.0.0.0:9090", "[::1]:9090": "[::1]:9090"} {
		if got := metricsAddr(in); got != want {
			t.Errorf("metricsAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWorkerServesMetrics(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd, out := jobsProcess(t, p, "worker", "--metrics", strconv.Itoa(port),
		"--run", "upper=tr a-z A-Z", "--run", "bad=false", "--run", "nap=sh -c 'echo 1h; exit 76'", "--concurrency", "4")
	jobs(t, p, "", "enqueue", "upper", "a")
	jobs(t, p, "", "enqueue", "upper", "b")
	jobs(t, p, "", "enqueue", "--max-retry", "0", "bad")
	jobs(t, p, "", "enqueue", "--delay", "1h", "upper")
	jobs(t, p, "", "enqueue", "nap") // snoozed for 1h: scheduled
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	var body string
	waitFor(t, 10*time.Second, "metrics show 3 processed jobs and 1 snoozed", func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.Contains(body, `jobs_processed_total{outcome="dead",queue="default",type="bad"} 1`) &&
			strings.Contains(body, `jobs_processed_total{outcome="success",queue="default",type="upper"} 2`) &&
			strings.Contains(body, `jobs_postponed_total{queue="default",reason="snooze",type="nap"} 1`)
	})
	for _, want := range []string{
		`jobs_duration_seconds_count{queue="default",type="upper"} 2`,
		"jobs_worker_busy 0",
		"jobs_worker_concurrency 4",
		`jobs_queue_depth{queue="default",state="scheduled"} 2`,
		`jobs_queue_depth{queue="default",state="dead"} 1`,
		`jobs_queue_depth{queue="default",state="ready"} 0`,
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz = %v, %v", resp, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("worker: %v\n%s", err, out)
	}
}
