package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	webdash "github.com/jobs-dev/jobs/dash"
	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// writeCerts makes a CA, a server certificate for 127.0.0.1 and a client certificate,
// and writes them as PEM files in dir.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jobs test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) {
		os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
	}
	write("ca.pem", "CERTIFICATE", caDER)
	for i, name := range []string{"server", "client"} {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(key)
		write(name+".pem", "CERTIFICATE", der)
		write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
}

// TestTLS runs the CLI against a local redis-server that only speaks TLS and requires
// client certificates.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeCerts(t, dir)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	f := func(name string) string { return filepath.Join(dir, name) }
	srv := exec.Command("redis-server", "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", f("server.pem"), "--tls-key-file", f("server-key.pem"),
		"--tls-ca-cert-file", f("ca.pem"), "--tls-auth-clients", "yes", "--save", "", "--dir", dir)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	url := "redis://127.0.0.1:" + strconv.Itoa(port)
	tlsArgs := []string{"--redis", url, "--tls-ca", f("ca.pem"), "--tls-cert", f("client.pem"), "--tls-key", f("client-key.pem")}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(f("ca.pem"))
	pool.AppendCertsFromPEM(caPEM)
	pair, _ := tls.LoadX509KeyPair(f("client.pem"), f("client-key.pem"))
	probe := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}})
	defer probe.Close()
	waitFor(t, 10*time.Second, "TLS redis-server up", func() bool { return probe.Ping(context.Background()).Err() == nil })

	r := runCLI("", append(tlsArgs, "enqueue", "t", "over tls")...)
	if r.code != 0 {
		t.Fatalf("enqueue over TLS = %+v", r)
	}
	if r := runCLI("", append(tlsArgs, "inspect", "--json", strings.TrimSpace(r.stdout))...); !strings.Contains(r.stdout, `"payload":"over tls"`) {
		t.Errorf("inspect over TLS = %+v", r)
	}
	if r := runCLI("", "--redis", url, "stats"); r.code != 1 || !strings.Contains(r.stderr, "cannot reach Redis") {
		t.Errorf("plain TCP to a TLS-only server = %+v, want exit 1", r)
	}
	if r := runCLI("", "--redis", url, "--tls-ca", f("ca.pem"), "stats"); r.code != 1 {
		t.Errorf("TLS without the required client certificate = %+v, want exit 1", r)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-ca", f("nope.pem")}, "--tls-ca"},
		{[]string{"--tls-ca", f("server-key.pem")}, "no PEM certificate"},
		{[]string{"--tls-cert", f("client.pem")}, "go together"},
	} {
		r := runCLI("", append(append([]string{"--redis", url}, tc.args...), "stats")...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("jobs %v stats = %+v, want exit 2 mentioning %q", tc.args, r, tc.want)
		}
	}
}

// leastPrivilege is README's ACL line: exactly the commands jobs uses, on its own keys
// (prefix "jobs"). Scripts count: every redis.call inside them is checked too.
const leastPrivilege = "on >s3cret-pass ~jobs:* resetchannels &jobs:cancel -@all " +
	"+ping +hello +info +config|get +cluster|info +time " +
	"+eval +evalsha +script|load +multi +exec +publish +subscribe " +
	"+get +set +del +exists +type +incr +incrby +pexpire +persist " +
	"+hget +hmget +hgetall +hset +hdel +hincrby +hkeys " +
	"+lpush +rpush +rpop +lrem +llen +lrange +ltrim +blpop " +
	"+sadd +smembers +sismember " +
	"+zadd +zrem +zcard +zcount +zrange +zrevrange +zrangebyscore +zremrangebyscore +zscore +lindex " +
	"+xadd +xtrim +xread +xrange +xinfo|stream " +
	"+zrank +zrevrank +pttl +xrevrange " +
	"+srem +scard +hsetnx +hscan +smismember +srandmember +zscan"

// TestACLUser runs every kind of command as an ACL user limited to README's least-privilege
// line (no CLIENT among it: the registry of live processes never needs it), and checks
// that a wrong password fails on one line without echoing it.
func TestACLUser(t *testing.T) {
	t.Parallel()
	srv := redistest.Own(t)
	admin := srv.Client(t)
	args := append([]any{"ACL", "SETUSER", "jobsuser"}, toAny(strings.Fields(leastPrivilege))...)
	if err := admin.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	url := "redis://jobsuser:s3cret-pass@" + srv.Addr
	run := func(args ...string) result {
		t.Helper()
		r := runCLI("", append([]string{"--redis", url}, args...)...)
		if r.code != 0 {
			t.Errorf("jobs %v as the least-privilege user = %+v", args, r)
		}
		return r
	}
	id := strings.TrimSpace(run("enqueue", "--unique-for", "1h", "t", "x").stdout)
	run("enqueue", "--delay", "1h", "--exclusive", "t")
	run("enqueue", "--file", os.DevNull)
	run("inspect", id)
	run("ls", "default")
	run("stats")
	run("stats", "--history", "1h")
	run("stats", "--history", "7d", "--json")
	run("cancel", id)
	run("retry", id)
	run("pause", "default")
	run("resume", "default")
	run("cron", "add", "n", "@hourly", "t")
	run("cron", "ls")
	run("cron", "rm", "n")
	run("doctor")
	run("purge", "default", "--state", "scheduled", "--yes")
	run("limit", "set", "default", "--concurrency", "100", "--rate", "1000/s") // the worker below claims under them
	run("limit", "ls")
	run("limit", "set", "other", "--concurrency", "1")
	run("limit", "rm", "other")
	run("limit", "set", "default", "--key-concurrency", "2", "--key-rate", "100/s")
	run("limit", "set", "default", "--key-concurrency", "5", "--key", "a")
	run("limit", "ls", "--json")
	run("limit", "rm", "default", "--key", "a")
	keyed := strings.TrimSpace(run("enqueue", "--limit-key", "a", "t").stdout) // the worker below runs it
	run("inspect", "--json", keyed)
	// Keyed ready jobs read by stats (ZSCAN of the keys, LLEN), ls (their lists) and purge.
	run("enqueue", "--queue", "keyed", "--limit-key", "k", "t")
	run("stats", "--json")
	run("ls", "keyed")
	run("ls", "keyed", "--offset", "1")
	run("purge", "keyed", "--state", "ready", "--yes")
	aclDash(t, url)
	aclCancelNotice(t, srv, admin)
	// A worker and a scheduler: claim, heartbeat with progress, ack, exclusive lock, cron
	// lock, the metrics history's flush.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "JOBS_TEST_CHILD=jobs", "JOBS_TEST_ARGS="+strings.Join([]string{
		"--redis", url, "worker", "--lease", "1s", "--beat", "200ms", "--history-interval", "100ms",
		"--queue", "default", "--queue", "handoff", "--run", "t=sh -c 'echo 50 half >&3'"}, "\x1f"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A hand-off: queue handoff has no limits, and the idle worker waits on it.
	waitFor(t, 10*time.Second, "the worker registered for hand-offs", func() bool {
		return admin.ZCard(context.Background(), "jobs:{handoff}:waiters").Val() == 1
	})
	handed := strings.TrimSpace(run("enqueue", "--queue", "handoff", "t").stdout)
	ex := strings.TrimSpace(run("enqueue", "--exclusive", "t").stdout)
	// A workflow: a dependent in this queue (resolved in the ack) and one in another
	// queue (through the outbox the worker delivers: HSCAN, resolve.lua, HDEL), and a
	// batch whose callback goes to another queue.
	dep := strings.TrimSpace(run("enqueue", "t").stdout)
	after := strings.TrimSpace(run("enqueue", "t", "--after", dep).stdout)
	across := strings.TrimSpace(run("enqueue", "--queue", "other", "t", "--after", "default/"+after).stdout)
	// inspect of a job with dependents (a sample and the count) and of one still waiting.
	later := strings.TrimSpace(run("enqueue", "--delay", "1h", "t").stdout)
	waiter := strings.TrimSpace(run("enqueue", "t", "--after", later).stdout)
	run("inspect", later)
	run("inspect", waiter)
	batchFile := filepath.Join(t.TempDir(), "batch.jsonl")
	os.WriteFile(batchFile, []byte(`{"type":"t","queue":"default"}`+"\n"+`{"type":"t","queue":"default"}`+"\n"), 0o600)
	bid := strings.TrimSpace(run("enqueue", "--file", batchFile, "--batch", "--queue", "other", "--on-complete", "t").stdout)
	waitFor(t, 10*time.Second, "the workflow's last dependent ready as the ACL user", func() bool {
		return strings.Contains(runCLI("", "--redis", url, "inspect", "--queue", "other", "--json", across).stdout, `"state":"ready"`)
	})
	waitFor(t, 10*time.Second, "the batch's callback fired as the ACL user", func() bool {
		return strings.Contains(runCLI("", "--redis", url, "batch", "inspect", "--json", bid).stdout, `"fired":true`)
	})
	run("inspect", "--queue", "other", across)
	waitFor(t, 10*time.Second, "exclusive job done as the ACL user", func() bool {
		return strings.Contains(runCLI("", "--redis", url, "inspect", "--json", ex).stdout, `"state":"done"`)
	})
	waitFor(t, 10*time.Second, "handed job done as the ACL user", func() bool {
		return strings.Contains(runCLI("", "--redis", url, "inspect", "--queue", "handoff", "--json", handed).stdout, `"state":"done"`)
	})
	waitFor(t, 10*time.Second, "keyed job done as the ACL user", func() bool {
		return strings.Contains(runCLI("", "--redis", url, "inspect", "--json", keyed).stdout, `"state":"done"`)
	})
	if r := run("inspect", "--json", ex); !strings.Contains(r.stdout, `"progress":50,"progress_msg":"half"`) {
		t.Errorf("progress written as the ACL user: %s", r.stdout)
	}
	// Not waitFor: on failure the worker's log below says why.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h := runCLI("", "--redis", url, "stats", "--history", "1h", "--json").stdout
		if strings.Contains(h, `"types":{"t":{"processed":`) { // queue default's jobs of type t
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the history not flushed as the ACL user within 10s: %.2000s", h)
			break
		}
	}
	// The registry without CLIENT: the worker's beats (register.lua) listed it, and an
	// operator can read the list and leave an order (order.lua).
	var listed struct {
		Workers []struct {
			ID  string `json:"id"`
			PID int    `json:"pid"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(run("workers", "--json").stdout), &listed); err != nil {
		t.Fatal(err)
	}
	wid := ""
	for _, w := range listed.Workers {
		if w.PID == cmd.Process.Pid {
			wid = w.ID
		}
	}
	if wid == "" {
		t.Errorf("jobs workers as the ACL user does not list the worker: %+v", listed)
	} else {
		run("workers")
		run("workers", "quiet", wid)
		waitFor(t, 5*time.Second, "the worker quiet, as the ACL user", func() bool {
			return strings.Contains(runCLI("", "--redis", url, "workers", "--json").stdout, `"state":"quiet"`)
		})
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil || t.Failed() { // out is complete only once the process is gone
		t.Errorf("worker as the ACL user: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "NOPERM") {
		t.Errorf("worker hit a missing permission:\n%s", out.String())
	}

	// jobs tail: XINFO STREAM and XREAD in a MULTI, then a blocking XREAD (Client.Wait
	// reads the same way).
	_, tout, terr := startJobs(t, "--redis", url, "tail", "--json", "--since", "0", "default")
	waitFor(t, 10*time.Second, "jobs tail as the ACL user", func() bool {
		return strings.Contains(tout.String(), `"event":"done"`) || strings.Contains(terr.String(), "NOPERM")
	})
	if strings.Contains(terr.String(), "NOPERM") {
		t.Errorf("jobs tail as the ACL user: %s", terr.String())
	}

	r := runCLI("", "--redis", "redis://jobsuser:wrong-pass@"+srv.Addr, "stats")
	if r.code != 1 || strings.Contains(r.stderr, "wrong-pass") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("wrong password = %+v, want exit 1 on one line without the password", r)
	}
}

// aclCancelNotice checks, as the least-privilege user, that cancel.lua may PUBLISH and
// WatchCancels may SUBSCRIBE on the cancel channel, and on no other.
func aclCancelNotice(t *testing.T, srv *redistest.Server, admin *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "jobsuser", Password: "s3cret-pass"})
	defer rdb.Close()
	c, err := queue.NewClient(rdb, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := queue.NewClient(rdb, queue.Config{Prefix: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.Of(other).WatchCancels(ctx, func(proto.CancelNotice) {}); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("WatchCancels(prefix other) as the ACL user = %v, want NOPERM", err)
	}
	notices := make(chan proto.CancelNotice, 1)
	done := make(chan error, 1)
	go func() { done <- broker.Of(c).WatchCancels(ctx, func(n proto.CancelNotice) { notices <- n }) }()
	waitFor(t, 5*time.Second, "WatchCancels subscribed as the ACL user", func() bool {
		return admin.PubSubNumSub(ctx, "jobs:cancel").Val()["jobs:cancel"] == 1
	})
	if _, err := c.Enqueue(ctx, "acl-cancel", nil, queue.On("acl")); err != nil {
		t.Fatal(err)
	}
	jobs, err := broker.Of(c).Claim(ctx, "acl", 1, time.Minute, "w")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim() as the ACL user = %d jobs, %v", len(jobs), err)
	}
	if _, err := c.Cancel(ctx, "acl", jobs[0].ID); err != nil {
		t.Fatalf("Cancel(active) as the ACL user: %v", err)
	}
	select {
	case n := <-notices:
		if n.ID != jobs[0].ID {
			t.Errorf("cancel notice = %+v, want job %s", n, jobs[0].ID)
		}
	case <-time.After(2 * time.Second):
		t.Errorf("no cancel notice as the ACL user within 2s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchCancels() as the ACL user = %v", err)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// aclDash reads every dashboard page and takes every kind of action as the
// least-privilege user: the pages' reads (ZRANK, PTTL, XREVRANGE, INFO) and the scripts
// (delete.lua, audit.lua) need nothing beyond README's line.
func aclDash(t *testing.T, url string) {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	client, err := queue.NewClient(rdb, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := webdash.New(client, webdash.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := client.Enqueue(ctx, "acl", []byte("x"), queue.Unique(time.Hour), queue.Exclusive("acl"), queue.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path string, form string, want int) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(form))
		if form != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("dashboard %s %s as the ACL user = %d, want %d: %.300s", method, path, w.Code, want, w.Body)
		}
	}
	for _, p := range []string{"/", "/queues/default?state=scheduled", "/queues/default?state=dead&type=x",
		"/jobs/" + id + "?queue=default", "/workers", "/audit", "/queues/default/purge?state=dead"} {
		do("GET", p, "", 200)
	}
	do("GET", "/queues/default?state=scheduled&cursor=1:x", "", 200) // ZRANK, ZSCORE, ZRANGE BYSCORE
	do("GET", "/queues/default?state=done&cursor=1:x", "", 200)      // ZREVRANK
	do("POST", "/jobs/"+id+"/delete", "queue=default", 303)
	do("POST", "/queues/default/retry-dead", "x=1", 303)
	do("GET", "/audit", "", 200)
}
