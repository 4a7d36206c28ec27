package worker

// How the loop claims: how many jobs it asks for (the free slots, plus a buffer while
// handlers are short), the exchange call that acks finished jobs and claims in one round
// trip, and the placing of claim replies in the order Redis ran the claims.

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

// room is how many jobs to claim: the free slots, plus the buffer's room while handlers
// are short, less what is claimed already.
func (l *loop) room() int {
	if l.quiet {
		return 0
	}
	n := l.cfg.Concurrency - l.busy - len(l.buffer) - l.reserved - l.held
	return max(n+l.aheadNow(), 0)
}

// aheadNow is how many jobs to claim beyond the free slots now: the buffer's size while
// handlers are short, else none.
func (l *loop) aheadNow() int {
	if l.avg < l.aheadUntil {
		return l.ahead()
	}
	return 0
}

// ahead is the buffer's size while handlers are short: enough jobs that the slots do not
// run dry during one round trip, and large batches (each call has a fixed cost, in Redis
// and here), but few enough that a buffered job waits only about a quarter of staleAfter
// at the average handler time.
func (l *loop) ahead() int {
	most := max(l.cfg.Concurrency, aheadMin)
	if l.avg <= 0 {
		return most
	}
	return int(min(int64(most), int64(l.cfg.Concurrency)*int64(l.staleAfter/4)/int64(l.avg)))
}

// timed records a handler's duration: a moving average decides whether to claim ahead.
func (l *loop) timed(took time.Duration) { l.avg += (took - l.avg) / 8 }

// slowed stops claiming ahead (until handlers are timed short again) when a buffered job
// went stale: the average was too optimistic, as handlers still running are not in it.
func (l *loop) slowed() { l.avg = max(l.avg, l.aheadUntil) }

// drawsPerExchange bounds how many queues one exchange claims from (see exchange).
const drawsPerExchange = 8

// exchange sends, for each queue that has acks waiting or a share of the room, one call
// that acks and claims (at most two in flight per queue). The room is shared among the
// queues that may have jobs, by weight: each chunk of it (an eighth, at least one job)
// goes to a queue drawn with probability weight/total.
func (l *loop) exchange(now time.Time) {
	l.ackFrees()
	want := 0
	if !l.stopping {
		want = l.room()
		// Claim in batches: while a claim is in flight, wait until half the room is free
		// before sending another, so each call claims many jobs (Redis's cost per call is
		// mostly fixed) and the two calls in flight alternate.
		// Not when a finished job holds a slot of a queue's concurrency limit: its ack
		// frees the slot and the same call takes it again, rather than the slot standing
		// empty for a round trip or two (a waiting worker woken, then claiming).
		if l.reserved > 0 && want < (l.cfg.Concurrency+l.aheadNow())/2 && !l.limitedAcks() {
			want = 0
		}
	}
	total := 0
	for _, q := range l.queues {
		q.share = 0
		if want > 0 && l.mayClaim(q, now) {
			total += q.weight
		}
	}
	// The room is drawn in at most drawsPerExchange chunks, not job by job: a worker
	// serving a thousand queues sent a call of about one job to each of ~160 queues per
	// exchange, paying a call's fixed cost (in Redis and here) per job.
	draws := min(want, proto.MaxBatch)
	chunk := max(1, (draws+drawsPerExchange-1)/drawsPerExchange)
	for left := draws; left > 0 && total > 0; left -= chunk {
		r := rand.N(total)
		for _, q := range l.queues {
			if l.mayClaim(q, now) {
				if r -= q.weight; r < 0 {
					q.share += min(chunk, left)
					break
				}
			}
		}
	}
	l.capShares()
	for _, q := range l.queues {
		// Acks ride with claims; alone, they go when nothing is in flight on the queue
		// (the reply of what is in flight sends them at once), or when stopping.
		// On a queue near its concurrency limit, acks go at once: each holds a slot of
		// the limit until it reaches Redis.
		acksAlone := len(q.acks) > 0 && (q.inflight == 0 || (l.stopping || l.nearLimit(q)) && q.inflight < 2)
		if q.inflight < 2 && !now.Before(q.retryAt) && (q.share > 0 || acksAlone || l.handDrain(q)) {
			l.sendExchange(q, q.share, now)
		}
	}
}

// mayClaim reports whether an exchange may claim from q now: at most two claims in
// flight per queue, so one runs in Redis while the other's reply is unpacked here, or
// one for a worker of concurrency 1, whose jobs then start exactly in queue order (two
// claims in flight may run in either order in Redis).
func (l *loop) mayClaim(q *queueState, now time.Time) bool {
	most := 2
	if l.cfg.Concurrency == 1 {
		most = 1
	}
	return !q.dry && q.inflight < 2 && q.claiming < most && !now.Before(q.retryAt) && !now.Before(q.limit.until)
}

// placeHeld places the claim replies of q in the order their calls were sent, each only
// once every earlier call on q has replied, and the jobs of the replies placed together in
// the order Redis claimed them (two calls in flight may run in either order): jobs of a
// queue start in the order they left its ready list.
func (l *loop) placeHeld(q *queueState, now time.Time) {
	var got []*run
	for {
		rep, ok := q.replies[q.placed+1]
		if !ok {
			break
		}
		delete(q.replies, q.placed+1)
		q.placed++
		for _, j := range rep.jobs {
			r := &run{job: j, q: q, state: claimed, renewed: rep.sent, claimed: rep.sent, index: -1}
			if !rep.redis.IsZero() {
				if j.StartedAt.After(rep.redis) {
					r.notBefore = rep.got.Add(j.StartedAt.Sub(rep.redis))
				} else if j.StartedAt.Before(rep.redis) {
					// Handed to this worker before the claim ran (handoff.go): its lease
					// is older.
					l.mark(traceDrained)
					r.renewed = l.handedAt(q, j.StartedAt, rep.sent)
					r.claimed = r.renewed
				}
			}
			got = append(got, r)
		}
	}
	l.held -= len(got)
	slices.SortStableFunc(got, func(a, b *run) int { return a.job.StartedAt.Compare(b.job.StartedAt) })
	var back []*run
	for _, r := range got {
		if !l.place(r, now) {
			back = append(back, r)
		}
	}
	if len(back) > 0 {
		l.handBack(back)
	}
}

// place puts a claimed run on an idle slot, or in the buffer (or holds it for its key's
// pause); false: it is to be handed back instead.
func (l *loop) place(r *run, now time.Time) bool {
	l.runs[r.job.Lease] = r
	switch {
	case l.stopping || l.quiet || now.Sub(r.renewed) >= l.staleAfter:
		// Held back behind a slow reply, its lease unrenewed for too long: another
		// worker may take it over before it could end here. (Or this worker is to run
		// nothing new.)
		return false
	case l.heldForPause(r):
	case len(l.idle) > 0:
		s := l.idle[len(l.idle)-1]
		l.idle = l.idle[:len(l.idle)-1]
		l.start(r, s, now)
	default:
		r.state = buffered
		if len(l.buffer) == 0 || r.renewed.Before(l.oldest) {
			l.oldest = r.renewed
		}
		l.buffer = insertByClaim(l.buffer, r)
	}
	return true
}

// insertByClaim adds r to the buffer after the runs of its queue that Redis claimed
// before it: a claim that ran in Redis after another may reply first.
func insertByClaim(buffer []*run, r *run) []*run {
	i := len(buffer)
	for k := len(buffer) - 1; k >= 0; k-- {
		if b := buffer[k]; b.q == r.q {
			if !b.job.StartedAt.After(r.job.StartedAt) {
				break
			}
			i = k
		}
	}
	return slices.Insert(buffer, i, r)
}
