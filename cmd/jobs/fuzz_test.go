package main

import (
	"strings"
	"testing"
)

// FuzzParseFileJob: any line of `jobs enqueue --file` is a job or an error, never a panic.
func FuzzParseFileJob(f *testing.F) {
	for _, s := range []string{`{"type":"a","payload":{"x":1}}`, `{"type":"a","payload":"text","delay":"5s"}`,
		`{"type":"a","at":"2026-12-24T18:00:00Z","max_retry":-1}`, `{"type":`, `[]`, `null`, `{"dealy":"1s"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, _ = parseFileJob([]byte(line))
	})
}

// FuzzRedact: a password in a Redis URL never survives redaction.
func FuzzRedact(f *testing.F) {
	f.Add("127.0.0.1:6379/0", "hunter2")
	f.Add("h:1", "s3cret")
	f.Fuzz(func(t *testing.T, hostPath, password string) {
		if len(password) < 6 || strings.ContainsAny(password, "@/:?#%[]& ") || strings.Contains(hostPath, password) {
			return
		}
		for _, u := range []string{
			"redis://user:" + password + "@" + hostPath,
			"redis://" + hostPath + "?addr=h2:2&password=" + password,         // cluster URL form
			"redis://" + hostPath + "?sentinel_password=" + password + "&x=1", // failover URL form
		} {
			if got := redact(u); strings.Contains(got, password) {
				t.Fatalf("redact(%q) = %q keeps the password", u, got)
			}
		}
	})
}

func TestBadRedisURLHidesPassword(t *testing.T) {
	r := runCLI("", "--redis", `redis://user:pa"ss@127.0.0.1:1`, "stats")
	if r.code != 2 || strings.Contains(r.stderr, `pa"ss`) {
		t.Errorf("bad URL with a password = exit %d, stderr %q", r.code, r.stderr)
	}
}
