package queue

import (
	"context"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
)

// Queues returns the names of every queue a job was ever enqueued on, sorted.
func (c *Client) Queues(ctx context.Context) ([]string, error) {
	qs, err := c.rdb.SMembers(ctx, c.keys.queues()).Result()
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	sort.Strings(qs)
	return qs, nil
}

// Get returns the job with the given ID in queue, or ErrNotFound.
func (c *Client) Get(ctx context.Context, queue, id string) (*Job, error) {
	if err := ValidateQueue(queue); err != nil {
		return nil, err
	}
	h, err := c.rdb.HGetAll(ctx, c.keys.queue(queue).job(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("get %s in queue %s: %w", id, queue, ErrNotFound)
	}
	j := decodeJob(queue, id, h)
	j.Lease = "" // a lease belongs to its claimer, never to a reader
	return j, nil
}

// Find returns the job with the given ID from whichever known queue holds it (one
// pipelined round trip over all queues), or ErrNotFound.
func (c *Client) Find(ctx context.Context, id string) (*Job, error) {
	qs, err := c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(qs))
	for i, q := range qs {
		cmds[i] = pipe.HGetAll(ctx, c.keys.queue(q).job(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("find %s: %w", id, err)
	}
	for i, cmd := range cmds {
		if h := cmd.Val(); len(h) > 0 {
			j := decodeJob(qs[i], id, h)
			j.Lease = ""
			return j, nil
		}
	}
	return nil, fmt.Errorf("find %s: %w", id, ErrNotFound)
}

// States lists every state, in lifecycle order.
var states = []State{StateWaiting, StateScheduled, StateReady, StateActive, StateRetry, StateDone, StateDead}

// ParseState returns the State named s, or ErrInvalid.
func ParseState(s string) (State, error) {
	for _, st := range states {
		if string(st) == s {
			return st, nil
		}
	}
	return "", invalid("state %q: want one of waiting, scheduled, ready, active, retry, done, dead", s)
}

// List returns up to limit jobs of queue in state, skipping the first offset: ready jobs
// in the order they will be claimed (those without a limit key, then each key's in the
// order the claims serve the keys: see [Client.Page]; skipping into the keys reads the
// lengths of the keys before, a thousand per two round trips), scheduled and retry jobs by due time, active jobs by
// lease deadline, done and dead jobs most recent first. An unknown queue is ErrNotFound.
func (c *Client) List(ctx context.Context, queue string, state State, offset, limit int) ([]*Job, error) {
	if err := ValidateQueue(queue); err != nil {
		return nil, err
	}
	if _, err := ParseState(string(state)); err != nil {
		return nil, err
	}
	if offset < 0 || limit <= 0 {
		return nil, invalid("offset %d and limit %d: want offset >= 0, limit > 0", offset, limit)
	}
	known, err := c.rdb.SIsMember(ctx, c.keys.queues(), queue).Result()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", queue, err)
	}
	if !known {
		return nil, fmt.Errorf("list: queue %q: %w", queue, ErrNotFound)
	}
	qk := c.keys.queue(queue)
	var ids []string
	stop := int64(offset + limit - 1)
	switch state {
	case StateReady:
		ids, err = c.readyList(ctx, qk, offset, limit)
	case StateScheduled:
		ids, err = c.rdb.ZRange(ctx, qk.scheduled, int64(offset), stop).Result()
	case StateWaiting:
		ids, err = c.rdb.ZRange(ctx, qk.waiting, int64(offset), stop).Result()
	case StateRetry:
		ids, err = c.rdb.ZRange(ctx, qk.retry, int64(offset), stop).Result()
	case StateActive:
		ids, err = c.rdb.ZRange(ctx, qk.active, int64(offset), stop).Result()
	case StateDead:
		ids, err = c.rdb.ZRevRange(ctx, qk.dead, int64(offset), stop).Result()
	case StateDone:
		ids, err = c.rdb.ZRevRange(ctx, qk.done, int64(offset), stop).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("list %s %s: %w", queue, state, err)
	}
	return c.getMany(ctx, queue, ids, "")
}

// getMany reads the jobs with the given IDs in one round trip, skipping any whose hash is
// gone (or, with want set, whose state differs).
func (c *Client) getMany(ctx context.Context, queue string, ids []string, want State) ([]*Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	qk := c.keys.queue(queue)
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, qk.job(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read jobs of %s: %w", queue, err)
	}
	jobs := make([]*Job, 0, len(ids))
	for i, cmd := range cmds {
		h := cmd.Val()
		if len(h) == 0 || (want != "" && State(h["state"]) != want) {
			continue
		}
		j := decodeJob(queue, ids[i], h)
		j.Lease = ""
		jobs = append(jobs, j)
	}
	return jobs, nil
}
