package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
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

// A program that exits but leaves a background process holding its stdout must not keep
// the attempt open until the job's timeout: it ends execWaitDelay after the exit.
func TestExecBackgroundChildDoesNotHoldTheJob(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	t.Cleanup(func() { killPidfile(t, pidfile) })
	mux := NewMux()
	mux.Handle("bg", mustExec(t, fmt.Sprintf(`sh -c 'sleep 30 & echo $! > %s; echo hi'`, pidfile)))
	startWorker(t, c, Config{Handler: mux})

	start := time.Now()
	id := enqueue(t, c, "bg", "", queue.Timeout(20*time.Second), queue.MaxRetry(0))
	j := waitState(t, c, "default", id, queue.StateDone, 10*time.Second)
	if took := time.Since(start); string(j.Result) != "hi\n" || took > 5*time.Second {
		t.Errorf("job = result %q after %s, want %q well within its 20s timeout", j.Result, took, "hi\n")
	}
}

// However the program resists (ignores SIGTERM, leaves children holding its pipes, has a
// grandchild that left its process group), Process returns soon after ctx ends and says
// the program was killed, and why.
func TestExecReturnsSoonAfterCancel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, script string }{
		{"ignores SIGTERM", `trap "" TERM; echo $$ > PID; while :; do sleep 1; done`},
		{"child holds stdout", `sleep 30 & echo $$ > PID; sleep 30`},
		// setsid: a new session, out of the process group that is killed; it still holds
		// stdout and stderr, so only WaitDelay ends the wait for them.
		{"grandchild escaped the group", `setsid sh -c 'echo $$ > PID; exec sleep 30' & sleep 30`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidfile := filepath.Join(t.TempDir(), "pid")
			t.Cleanup(func() { killPidfile(t, pidfile) })
			e := &Exec{Args: []string{"sh", "-c", strings.ReplaceAll(tc.script, "PID", pidfile)}}
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			returned := make(chan error, 1)
			go func() { returned <- e.Process(ctx, &queue.Job{ID: "1", Type: "t", Queue: "default", Attempt: 1}) }()
			readPidfile(t, pidfile, 10*time.Second)

			cancel(errors.New("test says stop"))
			cancelled := time.Now()
			select {
			case err := <-returned:
				if took := time.Since(cancelled); took > 3*time.Second {
					t.Errorf("Process() returned %s after cancel, want about %s", took, execWaitDelay)
				}
				if err == nil || !strings.Contains(err.Error(), "sh killed") || !strings.Contains(err.Error(), "test says stop") {
					t.Errorf("Process() err = %v, want it to say sh was killed and why (test says stop)", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Process() did not return within 15s of cancel")
			}
		})
	}
}

// Stdout beyond MaxExecResult is cut, through the real path: worker, Redis, client.
func TestExecResultIsCapped(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	mux := NewMux()
	mux.Handle("out", mustExec(t, `sh -c 'head -c "$(cat)" /dev/zero'`))
	startWorker(t, c, Config{Handler: mux})

	for _, tc := range []struct {
		size      int
		truncated bool
	}{{MaxExecResult, false}, {50 << 20, true}} {
		id := enqueue(t, c, "out", strconv.Itoa(tc.size), queue.MaxRetry(0))
		j := waitState(t, c, "default", id, queue.StateDone, 30*time.Second)
		if !tc.truncated {
			if len(j.Result) != tc.size || bytes.Count(j.Result, []byte{0}) != tc.size {
				t.Errorf("%d bytes of output: result has %d bytes, want them all", tc.size, len(j.Result))
			}
			continue
		}
		note := fmt.Sprintf(" of %d bytes kept]\n", tc.size)
		if len(j.Result) > MaxExecResult || !bytes.HasSuffix(j.Result, []byte(note)) {
			t.Errorf("%d bytes of output: result has %d bytes ending %q; want at most MaxExecResult (%d) ending %q",
				tc.size, len(j.Result), j.Result[max(0, len(j.Result)-80):], MaxExecResult, note)
			continue
		}
		head, _, _ := bytes.Cut(j.Result, []byte("\n[jobs:"))
		if len(head) < MaxExecResult-100 || bytes.Count(head, []byte{0}) != len(head) {
			t.Errorf("%d bytes of output: result keeps %d bytes of it before the note, want the first %d or so",
				tc.size, len(head), MaxExecResult-100)
		}
	}
}

// A worker killed with SIGKILL takes its programs with it (Linux: Pdeathsig), so a job
// whose lease then expires is not run twice at once.
func TestExecProgramDiesWithWorker(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux-only")
	}
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	killWorkerWhileItRuns(t, fmt.Sprintf(`sh -c 'echo $$ > %s; exec sleep 60'`, pidfile), pidfile)
}

// What a program started dies with the worker too (its guard kills the program's process
// group, execGuard): sh -c 'step; next' must not leave step running, with its job, once
// the worker is gone. Before the guard, Pdeathsig killed sh alone and the sleep ran on.
func TestExecGrandchildDiesWithWorker(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	killWorkerWhileItRuns(t, fmt.Sprintf(`sh -c 'sleep 60 & echo $! > %s; wait'`, pidfile), pidfile)
}

// killWorkerWhileItRuns starts a worker process (TestExecHelperWorker) running command,
// which writes the pid to watch to pidfile, SIGKILLs the worker, and fails unless that
// process is gone within 2s.
func killWorkerWhileItRuns(t *testing.T, command, pidfile string) {
	t.Helper()
	t.Cleanup(func() { killPidfile(t, pidfile) })
	worker := exec.Command(os.Args[0], "-test.run=^TestExecHelperWorker$", "-test.count=1", "-test.timeout=2m")
	worker.Env = append(os.Environ(), "BE_EXEC_PARENT=1", "JOBS_TEST_CLUSTER=", "EXEC_COMMAND="+command)
	worker.Stdout, worker.Stderr = testLog{t}, testLog{t}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Process.Kill(); _ = worker.Wait() })
	pid := readPidfile(t, pidfile, 30*time.Second)

	if err := worker.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	killed := time.Now()
	for alive(pid) {
		if time.Since(killed) > 2*time.Second {
			t.Fatalf("process %d still runs %s after its worker was killed", pid, time.Since(killed))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExecHelperWorker is the worker process of killWorkerWhileItRuns: it runs
// $EXEC_COMMAND as an Exec handler until it is killed.
func TestExecHelperWorker(t *testing.T) {
	if os.Getenv("BE_EXEC_PARENT") != "1" {
		t.Skip("helper process of killWorkerWhileItRuns")
	}
	// TestMain started a redis-server for this process, which it does not need and which
	// would outlive it: a SIGKILLed process cannot stop it.
	redistest.Shared(t).Stop()
	err := mustExec(t, os.Getenv("EXEC_COMMAND")).Process(context.Background(),
		&queue.Job{ID: "1", Type: "t", Queue: "default", Attempt: 1})
	t.Fatalf("Process() = %v; the helper should have been killed while it ran", err)
}

func mustExec(t *testing.T, command string) *Exec {
	t.Helper()
	e, err := NewExec(command)
	if err != nil {
		t.Fatalf("NewExec(%q) err = %v", command, err)
	}
	return e
}

// readPidfile waits for a program to write its pid to path.
func readPidfile(t *testing.T, path string, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s after %s", path, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killPidfile kills what a test left running, if it wrote its pid and still runs.
func killPidfile(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && alive(pid) {
		t.Logf("killing leftover pid %d", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// alive reports whether process pid exists and is not a zombie (an orphan is reaped by
// whichever process adopts it, which may take a while or never happen in a container).
func alive(pid int) bool {
	if runtime.GOOS == "linux" {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// "pid (comm) state ...": comm may hold spaces and parentheses; state follows the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z"))
	}
	return syscall.Kill(pid, 0) == nil
}
