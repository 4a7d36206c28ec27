package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a local Redis Cluster of masters only (no replicas), each a redis-server on
// a free loopback port, its slots split evenly by `redis-cli --cluster create`.
type Cluster struct {
	Servers []*Server
}

// StartCluster starts n (>= 3: Redis Cluster's minimum) cluster-enabled redis-servers,
// with any extra config arguments, joins them into one cluster and waits until every
// node reports cluster_state:ok.
func StartCluster(n int, extra ...string) (*Cluster, error) {
	return startCluster(n, 0, extra)
}

// StartClusterWithReplicas is StartCluster with one replica per master (2n servers), for
// tests that fail a master over to its replica (CLUSTER FAILOVER on the replica).
func StartClusterWithReplicas(n int, extra ...string) (*Cluster, error) {
	return startCluster(n, 1, extra)
}

func startCluster(n, replicas int, extra []string) (*Cluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, not %d", n)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found on PATH: cluster tests need it to create the cluster")
	}
	c := &Cluster{}
	for range n * (1 + replicas) {
		s, err := Start(append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000"}, extra...)...)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, lastLine(string(out)))
	}
	if err := c.waitOK(20 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// waitOK waits until every node sees the whole cluster healthy: right after `create`
// the nodes still exchange gossip, and a client that asks too early gets CLUSTERDOWN.
func (c *Cluster) waitOK(within time.Duration) error {
	deadline := time.Now().Add(within)
	for _, s := range c.Servers {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
		for {
			info, err := rdb.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				rdb.Close()
				return fmt.Errorf("redistest: cluster node %s not ok within %s: %v %q", s.Addr, within, err, firstLine(info))
			}
			time.Sleep(50 * time.Millisecond)
		}
		rdb.Close()
	}
	return nil
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// URL returns the cluster in go-redis's cluster URL form (redis://h1:p1?addr=h2:p2&...),
// the form `jobs --cluster --redis` takes.
func (c *Cluster) URL() string {
	addrs := c.Addrs()
	u := "redis://" + addrs[0]
	for i, a := range addrs[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + a
	}
	return u
}

// Client returns a cluster client, closed when the test ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// Stop stops every node and removes their directories.
func (c *Cluster) Stop() {
	for _, s := range c.Servers {
		s.Stop()
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}
