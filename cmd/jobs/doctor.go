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

	"github.com/jobs-dev/jobs/internal/broker"
)

// The oldest Redis the scripts run on: RPOP with a count (claim.lua) and fractional BLPOP
// timeouts arrived in 6.2.
const minRedisMajor, minRedisMinor = 6, 2

func doctorCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that the Redis at --redis is fit to hold jobs, and say what to fix",
		Description: "Checks the Redis version, maxmemory-policy (anything but noeviction can silently\n" +
			"drop jobs), free memory under maxmemory, that it takes writes (not a replica, no failed save),\n" +
			"persistence, cluster slot coverage and round-trip latency. Exits 0 when\n" +
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
			defer broker.Of(client).Redis().Close()
			checks := diagnoseAll(c.Context, broker.Of(client).Redis())
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
	// INFO without arguments: its default sections hold all that is read here, and INFO
	// with several sections is an error before Redis 7 and on jobs dev's server.
	raw, err := rdb.Info(ctx).Result()
	if err != nil {
		hint := ""
		if strings.Contains(err.Error(), "NOPERM") {
			hint = " (the ACL user needs +info)"
		}
		add("FAIL", "INFO failed: %v%s", err, hint)
		return out
	}
	for _, line := range strings.Split(raw, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			info[k] = v
		}
	}
	if info["redis_version"] == "" {
		// miniredis, behind `jobs dev`, answers INFO with its clients and stats only.
		add("FAIL", "not a Redis server: INFO has no redis_version (jobs dev's in-memory server answers so). "+
			"It runs jobs for trying them but holds nothing durably; point --redis at Redis >= 6.2 for real jobs")
		return append(out, roundTrip(ctx, rdb))
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

	out = append(out, memory(info))
	if info["role"] == "slave" {
		add("FAIL", "role: this is a replica, which refuses writes: point --redis at the master (or use --sentinel-master)")
	}
	if info["rdb_last_bgsave_status"] == "err" {
		add("FAIL", "the last RDB save failed: with stop-writes-on-bgsave-error (the default) Redis refuses writes until a save succeeds. Fix the disk, or CONFIG SET stop-writes-on-bgsave-error no")
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

	return append(out, roundTrip(ctx, rdb))
}

// roundTrip times ten PINGs: every transition is at least one round trip.
func roundTrip(ctx context.Context, rdb redis.UniversalClient) check {
	var rtts []time.Duration
	for range 10 {
		start := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return check{"FAIL", fmt.Sprintf("PING failed: %v", err)}
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	med := rtts[len(rtts)/2]
	level := "ok"
	if med > 5*time.Millisecond {
		level = "warn"
	}
	return check{level, fmt.Sprintf("round trip %.2f ms (median of 10 PINGs)", float64(med.Microseconds())/1000)}
}

// memory compares used_memory with maxmemory. With noeviction (which doctor requires)
// a Redis over its maxmemory refuses every write: enqueues, claims, and the acks that
// would free memory; a policy check alone called that Redis fit.
func memory(info map[string]string) check {
	used, err1 := strconv.ParseInt(info["used_memory"], 10, 64)
	limit, err2 := strconv.ParseInt(info["maxmemory"], 10, 64)
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
	switch {
	case err1 != nil || err2 != nil:
		return check{"warn", "memory: INFO has no used_memory or maxmemory: check that Redis has room"}
	case limit == 0:
		return check{"ok", fmt.Sprintf("memory: %s used, no maxmemory (bounded by the machine's memory)", mb(used))}
	case used >= limit:
		return check{"FAIL", fmt.Sprintf("memory: Redis is full (used_memory %s, maxmemory %s): it refuses every write. "+
			"Fix: raise maxmemory (CONFIG SET maxmemory) or free memory (jobs purge QUEUE --state done)", mb(used), mb(limit))}
	case used >= limit/10*9:
		return check{"warn", fmt.Sprintf("memory: %s of maxmemory %s used (over 90%%): at the limit Redis refuses every write", mb(used), mb(limit))}
	}
	return check{"ok", fmt.Sprintf("memory: %s of maxmemory %s used", mb(used), mb(limit))}
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
