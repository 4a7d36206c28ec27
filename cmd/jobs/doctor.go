package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// The oldest Redis the scripts run on: RPOP with a count (claim.lua) and fractional BLPOP
// timeouts arrived in 6.2.
const minRedisMajor, minRedisMinor = 6, 2

func doctorCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that the Redis at --redis is fit to hold jobs, and say what to fix",
		Description: "Checks the Redis version, maxmemory-policy (anything but noeviction can silently\n" +
			"drop jobs), persistence, cluster slot coverage and round-trip latency. Exits 0 when\n" +
			"nothing must change (warnings allowed), 1 with each problem on its own line. Example:\n\n" +
			"   jobs --redis redis://redis.internal:6379 doctor",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("doctor takes no arguments, got %q", c.Args().First())
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer client.Redis().Close()
			checks := diagnoseAll(c.Context, client.Redis())
			failed := 0
			for _, ch := range checks {
				fmt.Fprintf(e.stdout, "%-5s %s\n", ch.level, ch.msg)
				if ch.level == "FAIL" {
					failed++
				}
			}
			if failed > 0 {
				return fmt.Errorf("doctor: %d problem(s) to fix, listed above", failed)
			}
			return nil
		},
	}
}

type check struct{ level, msg string } // level: ok, warn, FAIL

// diagnoseAll runs every check against rdb, or against each master of a cluster (each
// holds some queues, so each must be fit), naming the node in each line.
func diagnoseAll(ctx context.Context, rdb redis.UniversalClient) []check {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return diagnose(ctx, rdb)
	}
	var mu sync.Mutex
	byNode := map[string][]check{}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		checks := diagnose(ctx, m)
		mu.Lock()
		byNode[m.Options().Addr] = checks
		mu.Unlock()
		return nil
	})
	if err != nil {
		return []check{{"FAIL", fmt.Sprintf("cannot reach every cluster master: %v", err)}}
	}
	var out []check
	for _, addr := range slices.Sorted(maps.Keys(byNode)) {
		for _, ch := range byNode[addr] {
			out = append(out, check{ch.level, addr + ": " + ch.msg})
		}
	}
	return out
}

// diagnose runs every check against rdb.
func diagnose(ctx context.Context, rdb redis.UniversalClient) []check {
	var out []check
	add := func(level, format string, args ...any) { out = append(out, check{level, fmt.Sprintf(format, args...)}) }
	info := map[string]string{}
	raw, err := rdb.Info(ctx, "server", "memory", "persistence", "cluster").Result()
	if err != nil {
		add("FAIL", "INFO failed: %v (the ACL user needs +info)", err)
		return out
	}
	for _, line := range strings.Split(raw, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			info[k] = v
		}
	}

	version := info["redis_version"]
	if versionAtLeast(version, minRedisMajor, minRedisMinor) {
		add("ok", "redis %s (the scripts need >= 6.2)", version)
	} else {
		add("FAIL", "redis %q is older than 6.2, which the scripts need (RPOP count, fractional BLPOP): upgrade Redis", version)
	}

	switch policy := info["maxmemory_policy"]; policy {
	case "noeviction":
		add("ok", "maxmemory-policy noeviction: a full Redis refuses writes instead of dropping jobs")
	case "":
		add("warn", "maxmemory-policy unknown (INFO has no maxmemory_policy): make sure it is noeviction")
	default:
		add("FAIL", "maxmemory-policy is %s: Redis may evict job keys and silently lose jobs. Fix: CONFIG SET maxmemory-policy noeviction (and in redis.conf)", policy)
	}

	aof := info["aof_enabled"] == "1"
	var rdbOn bool
	if save, err := rdb.ConfigGet(ctx, "save").Result(); err == nil {
		rdbOn = strings.TrimSpace(save["save"]) != ""
	} else {
		rdbOn = info["rdb_last_save_time"] != "" && info["rdb_changes_since_last_save"] != "" // managed Redis: CONFIG disabled
	}
	switch {
	case aof:
		add("ok", "persistence: AOF on (appendfsync decides how much a crash can lose: everysec ~1s, always nothing acknowledged)")
	case rdbOn:
		add("warn", "persistence: RDB snapshots only: a crash loses the jobs since the last snapshot. Consider CONFIG SET appendonly yes")
	default:
		add("warn", "persistence: neither AOF nor RDB is on: a restart loses every job. Fix: CONFIG SET appendonly yes (and in redis.conf)")
	}

	if info["cluster_enabled"] == "1" {
		ci, err := rdb.ClusterInfo(ctx).Result()
		switch {
		case err != nil:
			add("FAIL", "CLUSTER INFO failed: %v", err)
		case strings.Contains(ci, "cluster_state:ok") && strings.Contains(ci, "cluster_slots_assigned:16384"):
			add("ok", "cluster: state ok, all 16384 slots assigned")
		default:
			add("FAIL", "cluster: not every slot is served (cluster_state or slots_assigned wrong): fix the cluster (redis-cli --cluster check)")
		}
	}

	var rtts []time.Duration
	for range 10 {
		start := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			add("FAIL", "PING failed: %v", err)
			return out
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	med := rtts[len(rtts)/2]
	level := "ok"
	if med > 5*time.Millisecond {
		level = "warn" // every transition is at least one round trip
	}
	add(level, "round trip %.2f ms (median of 10 PINGs)", float64(med.Microseconds())/1000)
	return out
}

func versionAtLeast(v string, min ...int) bool {
	parts := strings.Split(v, ".")
	for i, want := range min {
		if i >= len(parts) {
			return false
		}
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return false
		}
		if n != want {
			return n > want
		}
	}
	return true
}
