package main

import (
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
)

func TestDoctor(t *testing.T) {
	t.Parallel()
	// Its own server: the test changes its configuration.
	srv, err := redistest.Start("--maxmemory-policy", "allkeys-lru")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	url := "redis://" + srv.Addr
	r := runCLI("", "--redis", url, "doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL  maxmemory-policy is allkeys-lru") ||
		!strings.Contains(r.stdout, "warn  persistence: neither AOF nor RDB") ||
		!strings.Contains(r.stdout, "ok    redis 7") || !strings.Contains(r.stdout, "round trip") ||
		!strings.Contains(r.stderr, "1 problem(s)") {
		t.Errorf("doctor on a bad Redis = exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rdb := srv.Client(t)
	rdb.ConfigSet(t.Context(), "maxmemory-policy", "noeviction")
	rdb.ConfigSet(t.Context(), "appendonly", "yes")
	r = runCLI("", "--redis", url, "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "ok    persistence: AOF on") {
		t.Errorf("doctor on a good Redis = exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestVersionAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"7.0.15": true, "6.2.0": true, "6.0.9": false, "10.0": true, "": false, "x": false} {
		if got := versionAtLeast(v, minRedisMajor, minRedisMinor); got != want {
			t.Errorf("versionAtLeast(%q) = %v, want %v", v, got, want)
		}
	}
}
