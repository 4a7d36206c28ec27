package main

import (
	"errors"
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
		_, _ = parseFileJob([]byte(line), "")
	})
}

// passwordMarker starts every password the fuzz targets hide: the rest of a URL cannot
// spell it, so finding it in an output means the password leaked, even in part.
const passwordMarker = "Pw7Secret"

// markedPassword returns the password to put in a URL whose other part is rest, and
// whether the check is sound for this input: the password holds no URL delimiter, and
// rest has no '%' escape (redact re-escapes the host, and "%A0"+"00000" once read as a
// password "A000000") and does not contain the marker.
func markedPassword(rest, password string) (string, bool) {
	ok := !strings.ContainsAny(password, "@/:?#%[]& ") && !strings.Contains(rest, "%") &&
		!strings.Contains(strings.ToLower(rest), strings.ToLower(passwordMarker))
	return passwordMarker + password, ok
}

// FuzzRedact: a password in a Redis URL never survives redaction.
func FuzzRedact(f *testing.F) {
	f.Add("127.0.0.1:6379/0", "hunter2")
	f.Add("h:1", "s3cret")
	f.Fuzz(func(t *testing.T, hostPath, password string) {
		password, ok := markedPassword(hostPath, password)
		if !ok {
			return
		}
		for _, u := range []string{
			"redis://user:" + password + "@" + hostPath,
			"redis://" + hostPath + "?addr=h2:2&password=" + password,         // cluster URL form
			"redis://" + hostPath + "?sentinel_password=" + password + "&x=1", // failover URL form
		} {
			if got := redact(u); strings.Contains(got, passwordMarker) {
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

// FuzzOpenRedis: any --redis value, in each of the three forms (one server, --cluster,
// --sentinel-master), gives a client configuration or a one-line usage error that does
// not quote the password, never a panic. It builds no client: one with min_idle_conns
// would dial whatever host the input names.
func FuzzOpenRedis(f *testing.F) {
	for _, s := range []string{"redis://127.0.0.1:6379/0", "rediss://h:1?addr=h2:2&addr=h3:3", "redis://:@",
		"redis://h:1/99999999999999999999", "unix:///tmp/r.sock?db=x", "redis://h:1?dial_timeout=-1s&addr=",
		"redis://[::1", "://", "redis://h:1?protocol=9&pool_size=-5&max_retries=x"} {
		f.Add(s, "hunter2")
	}
	f.Fuzz(func(t *testing.T, rest, password string) {
		urls := []string{rest}
		secret, check := markedPassword(rest, password)
		if check {
			urls = append(urls, "redis://user:"+secret+"@"+rest)
		}
		for _, raw := range urls {
			for _, tg := range []redisTarget{{url: raw}, {url: raw, cluster: true}, {url: raw, master: "mymaster"}} {
				_, err := redisConfig(tg)
				if err == nil {
					continue
				}
				var ue *usageError
				if msg := err.Error(); !errors.As(err, &ue) || strings.Contains(msg, "\n") ||
					check && strings.Contains(msg, passwordMarker) {
					t.Fatalf("redisConfig(%+v) = %T %q: want a one-line usage error without the password", tg, err, msg)
				}
			}
		}
	})
}

// TestPoolOptionsNeverCrash builds real clients (not only configurations, as the fuzz
// target does) from every bounded pool option at and around its bounds: each is a client
// or a usage error, never a panic or a huge allocation. Clients dial nothing but
// 127.0.0.1:1, and only with min_idle_conns.
func TestPoolOptionsNeverCrash(t *testing.T) {
	for _, name := range []string{"pool_size", "min_idle_conns", "max_idle_conns", "max_active_conns",
		"max_concurrent_dials", "pipeline_pool_size", "pipeline_read_buffer_size", "pipeline_write_buffer_size"} {
		for _, v := range []string{"-5", "-1", "0", "1", "10000", "10001", "67108864", "67108865", "2000000000"} {
			raw := "redis://127.0.0.1:1/0?" + name + "=" + v
			for _, tg := range []redisTarget{{url: raw}, {url: raw, cluster: true}, {url: raw, master: "m"}} {
				newClient, err := redisConfig(tg)
				if err != nil {
					var ue *usageError
					if !errors.As(err, &ue) || !strings.Contains(err.Error(), name) {
						t.Errorf("%+v: %v; want a usage error naming %s", tg, err, name)
					}
					continue
				}
				if name == "min_idle_conns" && v != "0" && v != "1" {
					continue // valid, and building it would start that many dials
				}
				newClient().Close()
			}
		}
	}
}
