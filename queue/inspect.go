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
