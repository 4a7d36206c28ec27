// Package redistest starts real redis-server processes on free loopback ports for tests.
// There are no mocks of Redis in this project: every test talks to a real server.
//
// A package's TestMain calls [Main]; tests call [Client] and [Prefix] and run in
// parallel, each on its own keys, with no FLUSHDB between them.
package redistest

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process started for tests.
type Server struct {
	Addr string // 127.0.0.1:port
	Dir  string // its working directory (RDB/AOF files, log)
	cmd  *exec.Cmd
	args []string
}

// Start starts a redis-server on a free loopback port with no persistence, plus any extra
// config arguments ("--appendonly", "yes", ...), and waits until it answers PING.
func Start(extra ...string) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH: tests need a real Redis " +
			"(Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis)")
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // a free port can be taken between Listen and redis-server's bind
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir}
		s.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--logfile", filepath.Join(dir, "redis.log")}, extra...)
		if lastErr = s.start(path); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

func (s *Server) start(path string) error {
	s.cmd = exec.Command(path, s.args...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("redis-server exited at start: %s", lastLine(string(log)))
		default:
		}
		if rdb.Ping(context.Background()).Err() == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = s.cmd.Process.Kill()
	return fmt.Errorf("redis-server on %s did not answer PING within 10s", s.Addr)
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	s.Kill()
	_ = os.RemoveAll(s.Dir)
}

// Kill stops the server at once (SIGKILL), keeping its files, as a crash would.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		for range 100 { // wait until the port is free again
			if c, err := net.DialTimeout("tcp", s.Addr, 50*time.Millisecond); err != nil {
				break
			} else {
				c.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Restart starts the server again on the same port and directory, after Kill.
func (s *Server) Restart() error {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return err
	}
	return s.start(path)
}

// Client returns a client for the server, closed when the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// The package's Redis, set by Main before any test runs and never changed after: the
// test harness's one piece of package state. With JOBS_TEST_CLUSTER=1 it is a local
// 3-master Redis Cluster instead of one server, so the same tests prove the scripts keep
// to one slot and the client copes with queues on different nodes.
var (
	shared        *Server
	sharedCluster *Cluster
)

// ClusterMode reports whether Main runs the package's tests on a Redis Cluster
// (JOBS_TEST_CLUSTER=1).
func ClusterMode() bool { return os.Getenv("JOBS_TEST_CLUSTER") == "1" }

// Main starts one redis-server (or, with JOBS_TEST_CLUSTER=1, a 3-master cluster) for
// the package, runs its tests, and stops it. With -short and no redis-server installed,
// tests that need Redis are skipped.
func Main(m *testing.M) {
	var err error
	if ClusterMode() {
		sharedCluster, err = StartCluster(3)
	}
	if err == nil {
		// In cluster mode too: the examples (Example functions cannot skip) dial one
		// server's address, SharedAddr. Tests still get the cluster (Shared skips).
		shared, err = Start()
	}
	if err != nil {
		if sharedCluster != nil {
			sharedCluster.Stop()
		}
		flag.Parse() // testing.Short panics before the flags are parsed (m.Run parses them)
		if !testing.Short() {
			fmt.Fprintln(os.Stderr, "redistest:", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	code := m.Run()
	if sharedCluster != nil {
		sharedCluster.Stop()
	}
	shared.Stop()
	os.Exit(code)
}

// Shared returns the package's server started by Main, skipping the test when there is
// none or when the tests run on a cluster (the test needs one server's address).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if sharedCluster != nil {
		tb.Skip("needs a single redis-server: not run with JOBS_TEST_CLUSTER=1")
	}
	if shared == nil {
		tb.Skip("no redis-server (run without -short for the full suite)")
	}
	return shared
}

// Own starts a redis-server of the test's own (Start, with extra's flags), stopped when
// the test ends (tb.Cleanup: after the cleanups registered later, such as a worker's
// stop), and fails the test if it cannot start.
func Own(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	srv, err := Start(extra...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Stop)
	return srv
}

// ClusterClientWithPool returns a client of the package's cluster (JOBS_TEST_CLUSTER=1)
// whose pool holds at most poolSize connections per node, closed when the test ends: for
// tests of what a small pool must still do. It skips the test off a cluster.
func ClusterClientWithPool(tb testing.TB, poolSize int) *redis.ClusterClient {
	tb.Helper()
	if sharedCluster == nil {
		tb.Skip("runs on a Redis Cluster: JOBS_TEST_CLUSTER=1 (make test runs it)")
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sharedCluster.Addrs(), PoolSize: poolSize})
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// Client returns a client for the package's Redis (a cluster client with
// JOBS_TEST_CLUSTER=1), closed when the test ends.
func Client(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	if sharedCluster != nil {
		return sharedCluster.Client(tb)
	}
	return Shared(tb).Client(tb)
}

var prefixSeq atomic.Int64

// Prefix returns a key prefix no other test in this process uses, so tests can run in
// parallel on one server.
func Prefix(tb testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, tb.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("t%d_%s_%d", os.Getpid(), name, prefixSeq.Add(1))
}

// SharedAddr returns the address of the package's server started by Main, for Example
// functions, which have no *testing.T; empty when there is none.
func SharedAddr() string {
	if shared == nil {
		return ""
	}
	return shared.Addr
}
