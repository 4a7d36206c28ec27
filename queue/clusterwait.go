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
// back at once for another worker, as the worker's passOn does. A waiter's BLPOP
// (WaitHanded) includes its hand list on the queue, and a job it pops when no Wait of
// that waiter wants it is pushed back on that list, for the worker's next wait or claim
// (or, the worker gone, for the reaper once the lease expires): never dropped.
//
// The BLPOPs run on connections of their own (blocking), never the application's pool:
// a worker of many queues blocks one connection per queue on that queue's node, as
// BullMQ's workers block one each. On the shared pool (5 connections per CPU per node by
// default) a Wait on 60 queues held every connection for up to a second at a time, and
// an enqueue beside it waited 12 s for one (TestClusterWaitOnManyQueuesLeavesThePoolFree).
type clusterWaiter struct {
	c *Client

	mu       sync.Mutex
	inflight map[popKey]bool // a BLPOP on the queue (and waiter's hand list) is running
	calls    []*waitCall     // Wait calls blocked now, oldest first
	// blocking is the BLPOPs' own cluster client (see the type's comment), made on the
	// first BLPOP and closed once none has run for blockingIdle, so that a Client that
	// stops waiting (a worker stopped) leaves no connection open; running counts the
	// BLPOPs on it, idle is the timer that closes it.
	blocking *redis.ClusterClient
	running  int
	idle     *time.Timer
}

// blockingIdle is how long the BLPOPs' own client stays open with no BLPOP running: a
// worker's waits follow each other within a second, so only a Client that stopped
// waiting closes it.
const blockingIdle = 30 * time.Second

// blockingPoolSize bounds the BLPOPs' connections per node: one per queue waited on
// there. Beyond it (more queues than that on one node), BLPOPs wait for a connection.
const blockingPoolSize = 4096

// popKey names one BLPOP: a queue's wake list, and the hand list of worker ("" for none).
type popKey struct{ queue, worker string }

// waitCall is one blocked Wait: it gets at most one outcome.
type waitCall struct {
	queues []string
	w      *proto.Waiter
	out    chan wakeOutcome // buffered 1
}

func (call *waitCall) wants(k popKey) bool {
	return slices.Contains(call.queues, k.queue) && call.worker() == k.worker
}

func (call *waitCall) worker() string {
	if call.w == nil {
		return ""
	}
	return call.w.Worker
}

type wakeOutcome struct {
	queue, token string
	job          *Job
	entry        string // the hand list's entry job was decoded from
	err          error
}

// wait is WaitHanded for queues that span several cluster slots.
func (w *clusterWaiter) wait(ctx context.Context, queues []string, timeout time.Duration, waiter *proto.Waiter) wakeOutcome {
	call := &waitCall{queues: queues, w: waiter, out: make(chan wakeOutcome, 1)}
	w.mu.Lock()
	w.calls = append(w.calls, call)
	for _, q := range queues {
		w.startLocked(popKey{q, call.worker()}, waiter)
	}
	w.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case o := <-call.out:
		return o
	case <-timer.C:
	case <-ctx.Done():
	}
	w.mu.Lock()
	delivered := !w.removeLocked(call) // no longer listed: an outcome is on its way
	w.mu.Unlock()
	if delivered {
		return <-call.out
	}
	return wakeOutcome{}
}

// startLocked starts the BLPOP k unless one runs already. w.mu is held.
func (w *clusterWaiter) startLocked(k popKey, waiter *proto.Waiter) {
	if w.inflight[k] {
		return
	}
	w.inflight[k] = true
	if w.blocking == nil {
		// The application's options (nodes, TLS, credentials, timeouts), with a pool of
		// its own sized for one connection per queue.
		opts := *w.c.rdb.(*redis.ClusterClient).Options()
		opts.PoolSize, opts.MinIdleConns = blockingPoolSize, 0
		w.blocking = redis.NewClusterClient(&opts)
	}
	if w.idle != nil {
		w.idle.Stop()
	}
	w.running++
	go w.pop(k, waiter, w.blocking)
}

// popped counts a BLPOP on the blocking client done and, when it was the last one
// running, arms the timer that closes the client. w.mu is held.
func (w *clusterWaiter) poppedLocked() {
	w.running--
	if w.running > 0 {
		return
	}
	if w.idle == nil {
		w.idle = time.AfterFunc(blockingIdle, w.closeIdle)
	} else {
		w.idle.Reset(blockingIdle)
	}
}

// closeIdle closes the blocking client if no BLPOP started on it since the timer was
// armed.
func (w *clusterWaiter) closeIdle() {
	w.mu.Lock()
	b := w.blocking
	if w.running > 0 || b == nil {
		w.mu.Unlock()
		return
	}
	w.blocking = nil
	w.mu.Unlock()
	_ = b.Close()
}

// pop runs one BLPOP on k's lists, delivers its outcome, and starts another while some
// Wait still waits on them.
func (w *clusterWaiter) pop(k popKey, waiter *proto.Waiter, blocking *redis.ClusterClient) {
	ctx := context.Background() // see the type's comment: nothing could cancel it anyway
	qk := w.c.keys.queue(k.queue)
	keys := []string{qk.wake}
	if waiter != nil {
		keys = []string{qk.hand(waiter.Worker), qk.wake} // a handed job first (see WaitHanded)
	}
	res, err := blocking.BLPop(ctx, blockFor(proto.MaxWait), keys...).Result()
	o := wakeOutcome{queue: k.queue}
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		o.err = fmt.Errorf("wait on %s: %w", k.queue, err)
	case len(res) != 2:
		o.err = fmt.Errorf("wait on %s: %w", k.queue, errBadReply)
	case res[0] == qk.wake:
		o.token = res[1]
	default:
		o.entry = res[1]
		o.job, o.err = decodeHand(k.queue, waiter.Worker, res[1])
	}

	w.mu.Lock()
	w.inflight[k] = false
	w.poppedLocked()
	var to *waitCall
	if o.token != "" || o.entry != "" || o.err != nil {
		for _, call := range w.calls {
			if call.wants(k) {
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
		if call.wants(k) {
			w.startLocked(k, call.w)
			break
		}
	}
	w.mu.Unlock()

	if to != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	switch {
	case o.token != "":
		// Nobody here waits on the queue any more: give the token to another worker. An
		// error only delays that worker until its next proto.MaxWait re-check.
		_ = w.c.broker().Wake(pctx, k.queue, o.token)
	case o.entry != "":
		// A job claimed for the waiter: back on its hand list, for its next wait or claim.
		// An error leaves the job to the reaper (its lease expires).
		_ = w.c.broker().handBackEntry(pctx, k.queue, waiter, o.entry)
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
