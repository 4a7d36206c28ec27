package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
)

// Detail is what the dashboard's job page shows beyond the job itself: what its keys
// hold in Redis right now.
type Detail struct {
	// TTL is the time left before the job's hash expires (done and dead jobs); zero when
	// it does not expire.
	TTL time.Duration
	// UniqueKey is the unique lock key the job holds (see [Unique]), UniqueHolder the ID of
	// the job that holds it now ("" when it is free) and UniqueTTL its time left.
	UniqueKey    string
	UniqueHolder string
	UniqueTTL    time.Duration
	// LockHeld says whether the job's exclusive lock (see [Exclusive]) is taken now, by
	// whichever worker, and LockTTL its time left. The lock's value is a random token, so
	// the holder is known only as the active job's worker.
	LockHeld bool
	LockTTL  time.Duration
	// LeaseDeadline is when an active job's lease ends unless its worker renews it (its
	// score in the active set); zero for a job that is not active. Past it, the job waits
	// for a reap to put it back.
	LeaseDeadline time.Time
}

// Detail reads the job's TTL, lease deadline, unique key and exclusive lock, in two
// round trips.
func (c *Client) Detail(ctx context.Context, j *Job) (*Detail, error) {
	if err := ValidateQueue(j.Queue); err != nil {
		return nil, err
	}
	qk := c.keys.queue(j.Queue)
	pipe := c.rdb.Pipeline()
	ttl := pipe.PTTL(ctx, qk.job(j.ID))
	ukey := pipe.HGet(ctx, qk.job(j.ID), "unique_key")
	var lockTTL *redis.DurationCmd
	var lease *redis.FloatCmd
	if j.State == StateActive {
		lease = pipe.ZScore(ctx, qk.active, j.ID)
	}
	if j.Exclusive != "" {
		lockTTL = pipe.PTTL(ctx, proto.ExclusiveLock(c.cfg.Prefix, j.Exclusive))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("detail of %s: %w", j.ID, err)
	}
	d := &Detail{TTL: max(ttl.Val(), 0), UniqueKey: ukey.Val()}
	if lease != nil && lease.Err() == nil {
		d.LeaseDeadline = time.UnixMilli(int64(lease.Val()))
	}
	if lockTTL != nil { // PTTL: -2 no such key, -1 no expiry (go-redis keeps both as is)
		d.LockHeld = lockTTL.Val() != -2
		d.LockTTL = max(lockTTL.Val(), 0)
	}
	if d.UniqueKey != "" {
		pipe := c.rdb.Pipeline()
		holder := pipe.Get(ctx, d.UniqueKey)
		uttl := pipe.PTTL(ctx, d.UniqueKey)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("detail of %s: %w", j.ID, err)
		}
		d.UniqueHolder, d.UniqueTTL = holder.Val(), max(uttl.Val(), 0)
	}
	return d, nil
}

// ServerInfo is what the dashboard shows of the Redis server (from INFO).
type ServerInfo struct {
	Version   string `json:"redis_version"`    // "" when the server does not say (jobs dev's in-memory server)
	UsedBytes int64  `json:"used_memory"`      // bytes
	MaxBytes  int64  `json:"maxmemory"`        // bytes; 0: no limit
	Policy    string `json:"maxmemory_policy"` // anything but noeviction can drop jobs
}

// ServerInfo reads the Redis server's version, memory and eviction policy (INFO, one
// round trip; on a cluster, one node's).
func (c *Client) ServerInfo(ctx context.Context) (ServerInfo, error) {
	raw, err := c.rdb.Info(ctx).Result()
	if err != nil {
		return ServerInfo{}, fmt.Errorf("server info: %w", err)
	}
	info := parseInfo(raw)
	si := ServerInfo{Version: info["redis_version"], Policy: info["maxmemory_policy"]}
	si.UsedBytes, _ = strconv.ParseInt(info["used_memory"], 10, 64)
	si.MaxBytes, _ = strconv.ParseInt(info["maxmemory"], 10, 64)
	return si, nil
}

// parseInfo reads the "field:value" lines of a Redis INFO reply (sections and comments
// skipped).
func parseInfo(raw string) map[string]string {
	info := map[string]string{}
	for line := range strings.SplitSeq(raw, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			info[k] = v
		}
	}
	return info
}
