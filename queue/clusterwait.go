package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
)

// clusterWaiter makes Wait work on a Redis Cluster when the queues live in different
// slots (a BLPOP over several slots is refused with CROSSSLOT). It runs at most one
// BLPOP per queue at a time, each on its own node, and hands whatever token it pops to
// one Wait call that is waiting on that queue.
//
// The BLPOPs outlive the Wait calls that started them: go-redis cannot cancel a blocking
// command (redis/go-redis#2556), so a Wait that returns early leaves its other BLPOPs
// running for up to blockFor(proto.MaxWait) (1s). Those are reused by the next Wait instead of
// piling up connections, and a token one of them pops when no Wait wants it is pushed
// back at once for another worker, as the worker's passOn does.
type clusterWaiter struct {
	c *Client

	mu       sync.Mutex
	inflight map[string]bool // queue -> a BLPOP on it is running
	calls    []*waitCall     // Wait calls blocked now, oldest first
}

// waitCall is one blocked Wait: it gets at most one outcome.
type waitCall struct {
	queues []string
	out    chan wakeOutcome // buffered 1
}

type wakeOutcome struct {
	queue, token string
	err          error
}

// wait is Wait for queues that span several cluster slots.
func (w *clusterWaiter) wait(ctx context.Context, queues []string, timeout time.Duration) (string, string, error) {
	call := &waitCall{queues: queues, out: make(chan wakeOutcome, 1)}
	w.mu.Lock()
	w.calls = append(w.calls, call)
	for _, q := range queues {
		w.startLocked(q)
	}
	w.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case o := <-call.out:
		return o.queue, o.token, o.err
	case <-timer.C:
	case <-ctx.Done():
	}
	w.mu.Lock()
	delivered := !w.removeLocked(call) // no longer listed: an outcome is on its way
	w.mu.Unlock()
	if delivered {
		o := <-call.out
		return o.queue, o.token, o.err
	}
	return "", "", nil
}

// startLocked starts a BLPOP on q unless one runs already. w.mu is held.
func (w *clusterWaiter) startLocked(q string) {
	if w.inflight[q] {
		return
	}
	w.inflight[q] = true
	go w.pop(q)
}

// pop runs one BLPOP on q, delivers its outcome, and starts another while some Wait
// still waits on q.
func (w *clusterWaiter) pop(q string) {
	ctx := context.Background() // see the type's comment: nothing could cancel it anyway
	res, err := w.c.rdb.BLPop(ctx, blockFor(proto.MaxWait), w.c.keys.queue(q).wake).Result()
	o := wakeOutcome{queue: q}
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		o.err = fmt.Errorf("wait on %s: %w", q, err)
	case len(res) != 2:
		o.err = fmt.Errorf("wait on %s: %w", q, errBadReply)
	default:
		o.token = res[1]
	}

	w.mu.Lock()
	w.inflight[q] = false
	var to *waitCall
	if o.token != "" || o.err != nil {
		for _, call := range w.calls {
			if slices.Contains(call.queues, q) {
				to = call
				break
			}
		}
		if to != nil {
			w.removeLocked(to)
			to.out <- o
		}
	}
	for _, call := range w.calls {
		if slices.Contains(call.queues, q) {
			w.startLocked(q)
			break
		}
	}
	w.mu.Unlock()

	if to == nil && o.token != "" {
		// Nobody here waits on q any more: give the token to another worker. An error
		// only delays that worker until its next proto.MaxWait re-check.
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = w.c.broker().Wake(pctx, q, o.token)
		cancel()
	}
}

// removeLocked takes call off the waiting list and reports whether it was on it. w.mu is
// held.
func (w *clusterWaiter) removeLocked(call *waitCall) bool {
	i := slices.Index(w.calls, call)
	if i < 0 {
		return false
	}
	w.calls = slices.Delete(w.calls, i, i+1)
	return true
}
