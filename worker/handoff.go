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
	// skew is this clock's lead on Redis's, at most (a registering claim's send time less
	// its Redis time): a job handed at Redis time t was handed here no later than
	// t + skew, when its lease began.
	skew time.Duration
}

// handWaiter is the waiter an exchange of n claims on q carries: while the worker may be
// registered there, with every claim, and, stopping, with the last call (handDrain).
func (l *loop) handWaiter(q *queueState, n int) *proto.Waiter {
	if q.hand.maybe && (n > 0 || l.stopping) {
		return &l.waiter
	}
	return nil
}

// handDrain reports whether a stopping worker must still drain its hand list on q and
// take its registration out: once nothing else is in flight on q, so that no claim sent
// earlier registers it again behind the drain.
func (l *loop) handDrain(q *queueState) bool {
	return l.stopping && q.hand.maybe && q.inflight == 0
}

// handClaimed takes the reply of a claim that carried the waiter: sent when it was sent,
// redisNow when it ran; registered whether it left the worker registered.
func (l *loop) handClaimed(q *queueState, sent, redisNow time.Time, registered bool, err error) {
	if err != nil || !redisNow.After(q.hand.at) {
		return // it may not have run, or a claim that ran after it replied first
	}
	q.hand.at = redisNow
	q.hand.maybe = registered
	if registered {
		q.hand.skew = sent.Sub(redisNow)
	}
}

// handed takes a job the wait popped from q's hand list: claimed for this worker by an
// enqueue, it runs as a claimed one, placed in order behind the replies of the calls on
// q sent before it came (placeHeld): one of them may hold older jobs of q, claimed before
// the hand-off (which found ready empty) and not placed yet. The registration it used is
// spent, so q is claimed again at once (off the job's path), to register for the next.
func (l *loop) handed(q *queueState, j *queue.Job, now time.Time) {
	q.hand.maybe = true
	q.dry = false
	renewed := minTime(now, j.StartedAt.Add(q.hand.skew))
	q.sent++
	q.replies[q.sent] = claimReply{jobs: []*queue.Job{j}, sent: renewed, got: now, redis: j.StartedAt}
	l.held++
	l.placeHeld(q, now)
}
