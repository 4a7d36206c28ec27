package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// TestRunProgramChecked: a worker whose --run program does not exist started, and every
// job of that type then failed until dead. It is refused at start-up, as is a file that
// is not executable; a program found in PATH or by path starts.
func TestRunProgramChecked(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	noexec := filepath.Join(t.TempDir(), "script")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--run", "t=/nonexistent/binary"}, "jobs: --run t: program /nonexistent/binary not found\n"},
		{[]string{"worker", "--run", "t=/tmp"}, "jobs: --run t: program /tmp is a directory\n"},
		{[]string{"worker", "--run", "ok=true", "--run", "t='no such program' x"}, "jobs: --run t: program no such program not found\n"},
		{[]string{"worker", "--run", "t=" + noexec}, "jobs: --run t: program " + noexec + " not executable\n"},
		{[]string{"dev", "--addr", "127.0.0.1:0", "--run", "t=/nonexistent/binary"}, "jobs: --run t: program /nonexistent/binary not found\n"},
	} {
		if r := jobs(t, p, "", tc.args...); r.code != 2 || r.stderr != tc.want {
			t.Errorf("jobs %q = %+v, want exit 2 and %q", tc.args, r, tc.want)
		}
	}
	// Found programs pass the check: the worker gets as far as its next one (a bad
	// --history-interval, checked after connecting).
	r := jobs(t, p, "", "worker", "--run", "t=true", "--run", "u=sh -c 'exit 1'", "--history-interval", "-1s")
	if r.code != 2 || !strings.Contains(r.stderr, "--history-interval") {
		t.Errorf("worker with programs found = %+v, want it past the program check", r)
	}
}
