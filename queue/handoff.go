package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
)

// Hand-offs: an idle worker's pickup in one round trip after the enqueue. A worker whose
// claim ran a queue dry is registered, by that claim, as a waiter of the queue
// (jobs:{q}:waiters, for proto.WaiterFor); an enqueue of a lone job that finds the
// queue's ready list empty claims the job for the waiter registered last, exactly as the
// worker's own claim of one would, and pushes it on the worker's hand list
// jobs:{q}:hand:<worker> instead of a wake token (scripts/enqueue.lua, hand_off in
// scripts/lib). The worker's BLPOP includes its hand lists, so the job reaches it
// with the BLPOP's reply, not after a claim's round trip more. Any claim of the worker's
// that carries its Waiter drains its hand list, so a job handed while it was claiming
// anyway is never stranded; a waiter that dies leaves its handed job to the reaper (the
// lease expires; the hand list expires with it).

// Waiter returns the registration for hand-offs of the worker with this ID, whose jobs
// have leases of lease. The lease tokens of the jobs handed to it start with a prefix
// of this Client's, fresh per Waiter.
func (c broker) Waiter(worker string, lease time.Duration) proto.Waiter {
	worker = eventSafe(worker)
	token := c.token + ".w" + strconv.FormatUint(c.tokens.Add(1), 36)
	return proto.Waiter{Worker: worker, Lease: lease,
		Member: strconv.FormatInt(ms(lease), 10) + "\t" + token + "\t" + worker}
}

// AckClaimWaiting is AckClaimLimited for a worker that waits for hand-offs (w, from
// Waiter, for the worker of that ID; nil: AckClaimLimited): the claim also returns the jobs handed to w meanwhile
// (already claimed, after the claimed ones), and registers w as a waiter of the queue
// when it ran the queue dry (n > 0, fewer jobs than asked from ready and no limit cut it
// short: registered), else takes w out. A worker passes w while it may be registered
// (its last claim was dry, or a job was handed to it), and once with n = 0 when it stops.
func (c broker) AckClaimWaiting(ctx context.Context, queue string, finished []*Job, results [][]byte, n int,
	lease time.Duration, worker string, w *proto.Waiter) (acked []error, claimed []*Job, lim proto.Limited, registered bool, err error) {
	return c.ackClaim(ctx, queue, finished, results, n, lease, worker, w)
}

// decodeHand decodes one entry of a hand list (hand_entry in scripts/lib): the lease
// token's prefix, the claim's now_us, then the job as a claim reply's job array, each
// value as "<length>:<value>".
func decodeHand(queue, worker, entry string) (*Job, error) {
	bad := fmt.Errorf("job handed on %s: %w", queue, errBadReply)
	var vals []string
	for rest := entry; rest != ""; {
		colon := strings.IndexByte(rest, ':')
		if colon <= 0 {
			return nil, bad
		}
		size, err := strconv.Atoi(rest[:colon])
		if err != nil || size < 0 || size > len(rest)-colon-1 {
			return nil, bad
		}
		vals = append(vals, rest[colon+1:colon+1+size])
		rest = rest[colon+1+size:]
	}
	if len(vals) < 6 {
		return nil, bad
	}
	flat := make([]any, len(vals)-2)
	for i, v := range vals[2:] {
		flat[i] = v
	}
	nums := make([]int64, 4) // now_us, then the attempt, k and start that end the job array
	for i, v := range []string{vals[1], vals[len(vals)-3], vals[len(vals)-2], vals[len(vals)-1]} {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, bad
		}
		nums[i] = x
	}
	flat[len(flat)-3], flat[len(flat)-2], flat[len(flat)-1] = nums[1], nums[2], nums[3]
	jobs, _, err := decodeClaimed(queue, worker, vals[0], []any{nums[0], []any{int64(0), int64(0), int64(0), int64(0)}, flat})
	if err != nil || len(jobs) != 1 {
		return nil, bad
	}
	return jobs[0], nil
}

// WaitHanded is Wait that also pops the jobs handed to w (nil: Wait): it returns a job
// handed on one of queues (claimed for w already: run it like a claimed one), or else a
// wake token as Wait does.
func (c broker) WaitHanded(ctx context.Context, queues []string, timeout time.Duration, w *proto.Waiter) (
	queue, token string, job *Job, err error) {
	timeout = min(max(timeout, time.Millisecond), proto.MaxWait)
	if c.clusterWait != nil && len(queues) > 1 { // one BLPOP may not span cluster slots
		o := c.clusterWait.wait(ctx, queues, timeout, w)
		return o.queue, o.token, o.job, o.err
	}
	// The hand lists first: BLPOP pops the first key that has an entry, and a handed job
	// is claimed already (a wake token only says to claim).
	keys := make([]string, 0, 2*len(queues))
	if w != nil {
		for _, q := range queues {
			keys = append(keys, c.keys.queue(q).hand(w.Worker))
		}
	}
	hands := len(keys)
	for _, q := range queues {
		keys = append(keys, c.keys.queue(q).wake)
	}
	res, err := c.rdb.BLPop(ctx, blockFor(timeout), keys...).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", "", nil, nil
	case err != nil:
		return "", "", nil, fmt.Errorf("wait on %v: %w", queues, err)
	case len(res) != 2:
		return "", "", nil, fmt.Errorf("wait on %v: %w", queues, errBadReply)
	}
	if i := slices.Index(keys, res[0]); i >= 0 && i < hands {
		job, err := decodeHand(queues[i], w.Worker, res[1])
		return queues[i], "", job, err
	}
	return c.keys.queueOfWake(res[0]), res[1], nil, nil
}

// handBackEntry pushes a hand list's entry that a BLPOP popped when no Wait wanted it
// back on the list, for the worker's next wait or claim (the list expires with the
// job's lease, as the enqueue set it; a worker that never comes back leaves the job to
// the reaper).
func (c broker) handBackEntry(ctx context.Context, queue string, w *proto.Waiter, entry string) error {
	hand := c.keys.queue(queue).hand(w.Worker)
	pipe := c.rdb.Pipeline()
	pipe.LPush(ctx, hand, entry)
	pipe.PExpire(ctx, hand, w.Lease)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("hand back a handed job on %s: %w", queue, err)
	}
	return nil
}
