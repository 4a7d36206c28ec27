package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// TestDevDemo runs README's first command: the whole lifecycle on the embedded server.
func TestDevDemo(t *testing.T) {
	t.Parallel()
	r := runCLI("", "dev", "--demo")
	out, errb := bytes.NewBufferString(r.stdout), bytes.NewBufferString(r.stderr)
	if r.code != 0 {
		t.Fatalf("jobs dev --demo = exit %d\nstdout:\n%s\nstderr:\n%s", r.code, out, errb)
	}
	for _, want := range []string{`result "hello from jobs"`, `result "SHOUT THIS"`, `result "I waited"`,
		`result "worked on attempt 2"`, "dead      last error: simulated bug (attempt 2)",
		`result "fired by cron"`, "All 6 jobs finished"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errb.String(), "NOTHING IS DURABLE") {
		t.Errorf("dev does not warn that nothing is durable: %q", errb)
	}
}

func TestDevBadUsage(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dev", "--run", "echo=cat"}, 2, "already handled"},
		{[]string{"dev", "--run", "x"}, 2, "TYPE=COMMAND"},
		{[]string{"dev", "extra"}, 2, "no arguments"},
		{[]string{"dev", "--addr", "127.0.0.1:99999"}, 2, "want a number from 0 to 65535"},
		{[]string{"dev", "--addr", busy.Addr().String()}, 1, "is a Redis already listening there?"},
		// Its Redis has no password and its worker runs the --run programs: this machine only.
		{[]string{"dev", "--addr", "0.0.0.0:0"}, 2, "not a loopback address: jobs dev's Redis has no password"},
		{[]string{"dev", "--addr", ":0"}, 2, "not a loopback address (no host: every interface)"},
		{[]string{"dev", "--addr", "[::]:0"}, 2, "not a loopback address"},
		{[]string{"dev", "--addr", "nohost"}, 2, "--addr: want HOST:PORT"},
	} {
		r := runCLI("", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("jobs %v = exit %d, stderr %q; want %d mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}
