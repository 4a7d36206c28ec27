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

// Wait blocks until a wake token arrives on one of the queues (a job was enqueued,
// promoted or handed back) or timeout passes, whichever is first; timeout is capped at
// MaxWait. This is how an idle worker waits without polling: enqueue pushes a token, one
// blocked worker pops it and claims at once. It returns true when woken by a token.
func (c *Client) Wait(ctx context.Context, queues []string, timeout time.Duration) (bool, error) {
	timeout = min(max(timeout, time.Millisecond), MaxWait)
	args := make([]any, 0, len(queues)+2)
	args = append(args, "blpop")
	for _, q := range queues {
		args = append(args, c.keys.queue(q).wake)
	}
	// go-redis's BLPop rounds timeouts up to whole seconds; BLPOP itself takes fractions
	// (Redis >= 6), which delayed jobs need to start on time.
	args = append(args, strconv.FormatFloat(timeout.Seconds(), 'f', 3, 64))
	err := c.rdb.Do(ctx, args...).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	default:
		return false, fmt.Errorf("wait on %v: %w", queues, err)
	}
}
