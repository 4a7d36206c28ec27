package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDevDemo runs README's first command: the whole lifecycle on the embedded server.
func TestDevDemo(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"jobs", "dev", "--demo"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("jobs dev --demo = exit %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errb)
	}
	for _, want := range []string{`result "hello from jobs"`, `result "SHOUT THIS"`, `result "I waited"`,
		`result "worked on attempt 2"`, "dead      last error: simulated bug (attempt 2)", "All 5 jobs finished"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, &out)
		}
	}
	if !strings.Contains(errb.String(), "NOTHING IS DURABLE") {
		t.Errorf("dev does not warn that nothing is durable: %q", &errb)
	}
}

func TestDevBadUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dev", "--run", "echo=cat"}, 2, "already handled"},
		{[]string{"dev", "--run", "x"}, 2, "TYPE=COMMAND"},
		{[]string{"dev", "extra"}, 2, "no arguments"},
		{[]string{"dev", "--addr", "256.0.0.1:1"}, 1, "cannot listen"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"jobs"}, tc.args...), nil, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("jobs %v = exit %d, stderr %q; want %d mentioning %q", tc.args, code, &errb, tc.code, tc.want)
		}
	}
}
