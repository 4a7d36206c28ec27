package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/devserver"
	"github.com/jobs-dev/jobs/internal/redistest"
)

func TestDoctor(t *testing.T) {
	t.Parallel()
	// Its own server: the test changes its configuration.
	srv := redistest.Own(t, "--maxmemory-policy", "allkeys-lru")
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

// TestDoctorFullRedis: a Redis at its maxmemory with noeviction refuses every write, and
// doctor said all was well.
func TestDoctorFullRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Own(t, "--maxmemory-policy", "noeviction", "--appendonly", "yes")
	rdb := srv.Client(t)
	ctx := t.Context()
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var usedMemory int64
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			usedMemory, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(usedMemory/2, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "probe", "x", 0).Err(); !redis.IsOOMError(err) {
		t.Fatalf("SET on the full Redis = %v, want an OOM refusal", err)
	}
	r := runCLI("", "--redis", "redis://"+srv.Addr, "doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL  memory: Redis is full") || !strings.Contains(r.stdout, "refuses every write") {
		t.Errorf("doctor on a full Redis = exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rdb.ConfigSet(ctx, "maxmemory", "0")
	if r := runCLI("", "--redis", "redis://"+srv.Addr, "doctor"); r.code != 0 || !strings.Contains(r.stdout, "ok    memory:") {
		t.Errorf("doctor once maxmemory is lifted = exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestDoctorDevServer: against `jobs dev`'s in-memory server doctor failed with an ACL
// hint (the server has no ACL; it answers INFO with few sections). It must say what the
// server is: fine for trying jobs, holding nothing durably.
func TestDoctorDevServer(t *testing.T) {
	t.Parallel()
	srv, err := devserver.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := runCLI("", "--redis", "redis://"+srv.Addr(), "doctor")
	if r.code != 1 || strings.Contains(r.stdout, "ACL") || strings.Contains(r.stdout, "+info") ||
		!strings.Contains(r.stdout, "jobs dev") || !strings.Contains(r.stdout, "nothing durably") ||
		!strings.Contains(r.stdout, "round trip") {
		t.Errorf("doctor on jobs dev's server = exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
