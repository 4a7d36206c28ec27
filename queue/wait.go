package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxWait bounds one Wait. Redis clients apply a read timeout (go-redis: 3s by default)
// that a longer block would trip, and an idle worker re-checks its queues this often
// anyway, which also covers wake tokens lost with a crashed worker.
const MaxWait = time.Second

// Wake tokens: what an idle worker should do when it pops one.
const (
	// WakeReady: a job is ready; claim.
	WakeReady = "r"
	// WakeScheduled: a job was scheduled or set to retry; promote, then plan the wait
	// until it is due.
	WakeScheduled = "s"
)

// Wait blocks until a wake token arrives on one of the queues (a job was enqueued,
// promoted, retried or handed back) or timeout passes; timeout is capped at MaxWait. This
// is how an idle worker waits without polling: enqueue pushes a token and one blocked
// worker pops it. It returns the queue and the token (WakeReady or WakeScheduled), or
// empty strings on timeout.
//
// Redis ends a timed-out BLPOP only on its next internal tick (every 100ms at the default
// hz 10), so the timeout is coarse: a worker that must act at a precise time (a delayed
// job's run_at) keeps its own timer and lets Wait run alongside.
//
// On a Redis Cluster, where one BLPOP cannot span the slots of several queues, Wait
// blocks on each queue separately (see clusterWaiter).
func (c *Client) Wait(ctx context.Context, queues []string, timeout time.Duration) (queue, token string, err error) {
	timeout = min(max(timeout, time.Millisecond), MaxWait)
	if c.clusterWait != nil && len(queues) > 1 { // one BLPOP may not span cluster slots
		return c.clusterWait.wait(ctx, queues, timeout)
	}
	args := make([]any, 0, len(queues)+2)
	args = append(args, "blpop")
	for _, q := range queues {
		args = append(args, c.keys.queue(q).wake)
	}
	// go-redis's BLPop rounds timeouts up to whole seconds; BLPOP itself takes fractions
	// (Redis >= 6).
	args = append(args, strconv.FormatFloat(timeout.Seconds(), 'f', 3, 64))
	res, err := c.rdb.Do(ctx, args...).StringSlice()
	switch {
	case errors.Is(err, redis.Nil):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("wait on %v: %w", queues, err)
	case len(res) != 2:
		return "", "", fmt.Errorf("wait on %v: %w", queues, errBadReply)
	}
	return c.keys.queueOfWake(res[0]), res[1], nil
}

// Wake pushes one wake token back on a queue's wake list: a worker that popped a token it
// cannot use (it became busy) passes it on to another idle worker.
func (c *Client) Wake(ctx context.Context, queue, token string) error {
	wake := c.keys.queue(queue).wake
	pipe := c.rdb.Pipeline()
	pipe.LPush(ctx, wake, token)
	pipe.LTrim(ctx, wake, 0, 127)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("wake %s: %w", queue, err)
	}
	return nil
}
