package queue

import (
	"context"
	"fmt"
	"time"
)

// blockFor is how long one BLPOP blocks for a wait of d: d rounded up to whole seconds
// (at least 1s). Whole seconds because a BLPOP must go through go-redis's BLPop, which
// takes only those (it truncates a fraction, and turns one under a second into 1s with
// a logged warning): BLPop alone extends the connection's read deadline by the block
// time, where a BLPOP sent by Do would fail with an i/o timeout, and drop its connection,
// whenever the client's ReadTimeout (3s by default, often set lower) is under the block.
func blockFor(d time.Duration) time.Duration {
	return max((d+time.Second-1)/time.Second, 1) * time.Second
}

// Wait blocks until a wake token arrives on one of the queues (a job was enqueued,
// promoted, retried or handed back) or timeout passes; timeout is capped at proto.MaxWait. This
// is how an idle worker waits without polling: enqueue pushes a token and one blocked
// worker pops it. It returns the queue and the token (proto.WakeReady or proto.WakeScheduled), or
// empty strings on timeout.
//
// The timeout is coarse: Redis blocks for whole seconds only here (see blockFor: timeout
// rounded up, so in practice 1s whatever timeout under proto.MaxWait is given), and ends a
// timed-out BLPOP on its next internal tick (every 100ms at the default hz 10). A caller
// that must act at a precise time (a delayed job's run_at) keeps its own timer and lets
// Wait run alongside, as the worker does. A Wait returns as soon as a token arrives.
//
// On a Redis Cluster, where one BLPOP cannot span the slots of several queues, Wait
// blocks on each queue separately (see clusterWaiter); it returns at timeout then, while
// its BLPOPs run to the whole second.
func (c broker) Wait(ctx context.Context, queues []string, timeout time.Duration) (queue, token string, err error) {
	queue, token, _, err = c.WaitHanded(ctx, queues, timeout, nil)
	return queue, token, err
}

// Wake pushes one wake token back on a queue's wake list: a worker that popped a token it
// cannot use (it became busy) passes it on to another idle worker.
func (c broker) Wake(ctx context.Context, queue, token string) error {
	wake := c.keys.queue(queue).wake
	pipe := c.rdb.Pipeline()
	pipe.LPush(ctx, wake, token)
	pipe.LTrim(ctx, wake, 0, 127)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("wake %s: %w", queue, err)
	}
	return nil
}
