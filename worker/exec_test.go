package worker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

func TestExecHandler(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	os.WriteFile(script, []byte(`#!/bin/sh
payload=$(cat)
case "$payload" in
  ok) echo "$JOB_ID $JOB_TYPE $JOB_QUEUE $JOB_ATTEMPT" ;;
  retry) [ "$JOB_ATTEMPT" -ge 2 ] && { echo second; exit 0; }; exit 75 ;;
  fail) echo "bad thing" >&2; exit 3 ;;
  hang) sleep 30 & sleep 30 ;;
  '$(touch pwned)') echo "literal: $payload" ;;
esac
`), 0o755)
	mux := NewMux()
	h, err := NewExec(fmt.Sprintf("sh '%s'", script))
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("sh", h)
	startWorker(t, c, Config{Handler: mux})

	ok := enqueue(t, c, "sh", "ok")
	if j := waitState(t, c, "default", ok, queue.StateDone, 5*time.Second); string(j.Result) != ok+" sh default 1\n" {
		t.Errorf("result = %q", j.Result)
	}
	retry := enqueue(t, c, "sh", "retry")
	if j := waitState(t, c, "default", retry, queue.StateDone, 5*time.Second); j.Attempt != 2 || !strings.Contains(j.LastError, "exit status 75") {
		t.Errorf("exit 75: attempt %d last_error %q", j.Attempt, j.LastError)
	}
	fail := enqueue(t, c, "sh", "fail", queue.MaxRetry(0))
	if j := waitState(t, c, "default", fail, queue.StateDead, 5*time.Second); !strings.Contains(j.LastError, "exit status 3: bad thing") {
		t.Errorf("exit 3: last_error %q", j.LastError)
	}
	inject := enqueue(t, c, "sh", "$(touch pwned)")
	waitState(t, c, "default", inject, queue.StateDone, 5*time.Second)
	if _, err := os.Stat("pwned"); err == nil {
		t.Errorf("payload was run by a shell")
	}
	start := time.Now()
	hang := enqueue(t, c, "sh", "hang", queue.Timeout(200*time.Millisecond), queue.MaxRetry(0))
	j := waitState(t, c, "default", hang, queue.StateDead, 5*time.Second)
	if !strings.Contains(j.LastError, "killed") || time.Since(start) > 3*time.Second {
		t.Errorf("hang: last_error %q after %s", j.LastError, time.Since(start))
	}
}
