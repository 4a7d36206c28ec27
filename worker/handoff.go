package worker

import (
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// Hand-offs (queue/handoff.go): a claim that runs a queue dry registers this worker as a
// waiter of the queue, and an enqueue that then finds the queue's ready list empty
// claims its job for the worker and pushes it on the worker's hand list, which the
// worker's wait includes: the job arrives with the wait's reply, claimed, and starts
// without a claim's round trip. The claims that carry the waiter drain the hand list (a
// job handed while the worker was claiming anyway), and the stop drains it once more and
// takes the registration out; the jobs drained then are handed back like buffered ones.

// handState is what the loop knows of its registration for hand-offs on one queue.
type handState struct {
	// maybe: this worker may be registered on the queue, or have jobs on its hand list
	// there: its claims carry its waiter, and its stop drains the list. Set by a dry
	// claim and by a job handed; cleared by a claim that carried the waiter and took the
	// registration out (the last one in Redis's order: at).
	maybe bool
	at    time.Time // Redis's time of the claim that last set maybe
	// clock pairs this clock with Redis's: a claim on q was sent at sent (this clock)
	// and ran at redis (Redis's), so an instant t of Redis's was no earlier than
	// sent + (t - redis) here. Of the claims that took the shortest round trip (the
	// tightest pair: a claim that waited for a connection runs long after it was sent),
	// or the latest after clockFor.
	clock struct {
		sent, redis time.Time
		rtt         time.Duration
	}
}

// clockFor is how long a pairing of the clocks is kept before any claim replaces it:
// a step of Redis's clock misleads handedAt that long at most.
const clockFor = 10 * time.Second

// handClock takes the pairing of a claim on q that was sent at sent, answered at got and
// ran at redis (Redis's time).
func (l *loop) handClock(q *queueState, sent, got, redis time.Time) {
	c := &q.hand.clock
	if redis.IsZero() {
		return
	}
	if rtt := got.Sub(sent); c.sent.IsZero() || rtt <= c.rtt || got.Sub(c.sent) > clockFor {
		c.sent, c.redis, c.rtt = sent, redis, rtt
	}
}

// handedAt is, on this clock, when a job of q handed at Redis time started (its lease
// began) at the earliest, and no later than now.
func (l *loop) handedAt(q *queueState, started, now time.Time) time.Time {
	if q.hand.clock.sent.IsZero() {
		return now // never: a hand-off follows a claim on q
	}
	return minTime(now, q.hand.clock.sent.Add(started.Sub(q.hand.clock.redis)))
}

// handWaiter is the waiter an exchange of n claims on q carries: while the worker may be
// registered there, with every claim, and, stopping, with the last call (handDrain).
func (l *loop) handWaiter(q *queueState, n int) *proto.Waiter {
	if q.hand.maybe && (n > 0 || l.stopping) {
		return l.waiter
	}
	return nil
}

// handDrain reports whether a stopping worker must still drain its hand list on q and
// take its registration out: once nothing else is in flight on q, so that no claim sent
// earlier registers it again behind the drain.
func (l *loop) handDrain(q *queueState) bool {
	return l.stopping && l.waiter != nil && q.hand.maybe && q.inflight == 0
}

// handClaimed takes the reply of a claim that carried the waiter: redisNow is when it
// ran, registered whether it left the worker registered.
func (l *loop) handClaimed(q *queueState, redisNow time.Time, registered bool, err error) {
	if err != nil || !redisNow.After(q.hand.at) {
		return // it may not have run, or a claim that ran after it replied first
	}
	q.hand.at = redisNow
	q.hand.maybe = registered
}

// handed takes a job the wait popped from q's hand list: claimed for this worker by an
// enqueue, it runs as a claimed one, placed in order behind the replies of the calls on
// q sent before it came (placeHeld): one of them may hold older jobs of q, claimed before
// the hand-off (which found ready empty) and not placed yet. The registration it used is
// spent, so q is claimed again at once (off the job's path), to register for the next.
func (l *loop) handed(q *queueState, j *queue.Job, now time.Time) {
	q.hand.maybe = true
	q.dry = false
	renewed := l.handedAt(q, j.StartedAt, now)
	q.sent++
	q.replies[q.sent] = claimReply{jobs: []*queue.Job{j}, sent: renewed, got: now, redis: j.StartedAt}
	l.held++
	l.placeHeld(q, now)
}
