package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a local Sentinel setup: a master, one replica and one Sentinel (quorum 1)
// watching them under MasterName, with a short down-after so failovers take seconds.
type Sentinel struct {
	MasterName string
	Master     *Server // the first master: after a failover, Replica is the master
	Replica    *Server
	Sentinel   *Server // redis-server --sentinel
}

// StartSentinel starts the master, the replica and the Sentinel, and waits until the
// replica is in sync and the Sentinel knows it (so a failover has somewhere to go).
func StartSentinel() (*Sentinel, error) {
	s := &Sentinel{MasterName: "jobsmaster"}
	var err error
	if s.Master, err = Start(); err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(s.Master.Addr, ":")
	if s.Replica, err = Start("--replicaof", host, port); err != nil {
		s.Stop()
		return nil, err
	}
	if s.Sentinel, err = startSentinel(s.MasterName, s.Master.Addr); err != nil {
		s.Stop()
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	ctx := context.Background()
	replica := redis.NewClient(&redis.Options{Addr: s.Replica.Addr})
	defer replica.Close()
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr})
	defer sentinel.Close()
	for {
		info, _ := replica.Info(ctx, "replication").Result()
		replicas, _ := sentinel.Replicas(ctx, s.MasterName).Result()
		if strings.Contains(info, "master_link_status:up") && len(replicas) > 0 {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("redistest: replica not in sync or unknown to the Sentinel within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startSentinel runs redis-server in Sentinel mode, which needs a config file it can
// rewrite.
func startSentinel(master, masterAddr string) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-sentinel-")
	if err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(masterAddr, ":")
	var lastErr error
	for range 5 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s %s %s 1\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 10000\n",
			p, dir, filepath.Join(dir, "redis.log"), master, host, port, master, master)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(p), Dir: dir, args: []string{conf, "--sentinel"}}
		if lastErr = s.start(path); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// URL returns the Sentinel's address as `jobs --sentinel-master NAME --redis` takes it.
func (s *Sentinel) URL() string { return "redis://" + s.Sentinel.Addr }

// Client returns a Sentinel-backed client of the master, closed when the test ends.
func (s *Sentinel) Client(tb testing.TB) *redis.Client {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: s.MasterName, SentinelAddrs: []string{s.Sentinel.Addr}})
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// Stop stops every process and removes their directories.
func (s *Sentinel) Stop() {
	for _, srv := range []*Server{s.Sentinel, s.Replica, s.Master} {
		if srv != nil {
			srv.Stop()
		}
	}
}
