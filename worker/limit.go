package worker

// How the loop obeys its queues' limits (queue.Client.SetLimit, `jobs limit set`). The
// claim scripts check and take the limits in Redis; a claim they cut short says why and
// until when, and the loop claims nothing more from that queue until then: for a rate,
// exactly when the next token is due; for concurrency, when a freed slot's wake token
// comes (the scripts that end a job push one), or at the latest when the earliest lease
// expires (the slot of a worker that died). No polling, and the other queues of the
// worker keep claiming as before. A change of the limits is announced on the notice
// channel, and ends every such wait at once.

import (
	"errors"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// limitState is what a queue's last claim met of its limits.
type limitState struct {
	conc  int       // the queue's concurrency limit (0: none)
	free  int       // slots the last claim left free under it
	by    string    // proto.LimitConcurrency or proto.LimitRate while waiting on it; else ""
	until time.Time // no claim on the queue before this
}

// limitMet records what the reply of a claim sent at sent said of q's limits.
func (l *loop) limitMet(q *queueState, lim proto.Limited, sent time.Time) {
	q.limit = limitState{conc: lim.Concurrency, free: lim.Free, by: lim.By}
	if lim.By != "" {
		// From the claim's sending, not its reply: the next claim then reaches Redis
		// about when the token is due (half a round trip after the script ran, plus the
		// wait). Timed from the reply, every start would come a round trip late, and
		// GCRA does not give lost time back: at 20/s that was 2.6% under the rate. A
		// claim that arrives early gets nothing and the exact rest of the wait.
		q.limit.until = sent.Add(lim.Wait)
	}
}

// woken ends a wait on the concurrency limit or the keys' limits: a wake token came (a slot freed, or a job
// was made ready, which another worker's freed slot may now take), or the wait on wake
// lists ended without one (a token may have been lost with a crashed worker).
func (s *limitState) woken() {
	if s.by == proto.LimitConcurrency || s.by == proto.LimitKeys {
		s.until = time.Time{}
	}
}

// ackFrees ends the wait on the concurrency limit of a queue with acks to send: the call
// that carries them frees their slots before its claim, so it may claim them at once,
// with no wake token round trip.
func (l *loop) ackFrees() {
	for _, q := range l.queues {
		if len(q.acks) > 0 {
			q.limit.woken()
		}
	}
}

// waitsForSlot reports whether the queue waits on its concurrency limit, or on its keys'
// limits: the loop's wait then blocks on its wake list too, where a freed slot (of the
// queue, or of a key that held its jobs back) pushes a token.
func (s *limitState) waitsForSlot(now time.Time) bool {
	return (s.by == proto.LimitConcurrency || s.by == proto.LimitKeys) && now.Before(s.until)
}

// limitChanged ends any wait on the named queue's limits: an operator changed them.
func (l *loop) limitChanged(name string) {
	if q := l.byName[name]; q != nil {
		q.limit.until = time.Time{}
		q.dry = false
	}
}

// capShares keeps the claims of a queue with a concurrency limit to the worker's free
// slots and half the queue's slots its last claim left free: a job claimed ahead into
// the buffer holds one of the queue's slots that another worker could run now, so near
// the limit a worker claims only what it runs at once, and far from it (a limit that
// never binds) it claims ahead as on any queue.
func (l *loop) capShares() {
	free := max(l.cfg.Concurrency-l.busy-len(l.buffer)-l.reserved-l.held, 0)
	for _, q := range l.queues {
		if q.limit.conc > 0 {
			q.share = min(q.share, free+q.limit.free/2)
		}
	}
}

// holdKey takes out of the buffer the runs of r's queue and limit key: r's handler paused
// the key (PauseKey), and they were claimed ahead before the pause began; run here, they
// would start during it. They are handed back once the pause is in Redis (releaseKey):
// handed back before, a claim could take them again before the pause.
func (l *loop) holdKey(r *run, err error) {
	if r.job.LimitKey == "" {
		return
	}
	var pp *postpone
	errors.As(err, &pp)
	if l.keyPausing == nil {
		l.keyPausing = map[string]keyPause{}
	}
	l.keyPausing[pauseKeyOf(r.job)] = keyPause{r: r, until: time.Now().Add(pp.after)}
	var out []*run
	keep := l.buffer[:0]
	for _, b := range l.buffer {
		if b.job.Queue == r.job.Queue && b.job.LimitKey == r.job.LimitKey {
			out = append(out, b)
			continue
		}
		keep = append(keep, b)
	}
	clear(l.buffer[len(keep):])
	l.buffer = keep
	for _, b := range out {
		l.holdForPause(r, b)
	}
}

// holdForPause holds b until r's pause call ends (releaseKey).
func (l *loop) holdForPause(r, b *run) {
	if l.keyHeld == nil {
		l.keyHeld = map[*run][]*run{}
	}
	l.keyHeld[r] = append(l.keyHeld[r], b)
}

// heldForPause holds a run just claimed if a handler here is pausing its limit key now:
// the claim ran in Redis before the pause did.
// Until the pause ends (by this worker's clock): a claim sent before the pause reached
// Redis may reply after the pause call did. Not a claim sent after the pause call's
// reply came: Redis ran it after the pause, so it got the key's job only because the
// pause had ended there (`jobs resume --key`); held back, that job would be claimed and
// handed back again and again until this worker's end of the pause.
func (l *loop) heldForPause(b *run) bool {
	if b.job.LimitKey == "" || len(l.keyPausing) == 0 {
		return false
	}
	k := pauseKeyOf(b.job)
	p, ok := l.keyPausing[k]
	switch {
	case !ok:
		return false
	case !time.Now().Before(p.until):
		delete(l.keyPausing, k)
		return false
	case p.r != nil:
		l.holdForPause(p.r, b)
	case !b.claimed.Before(p.released):
		return false
	default:
		l.handBack([]*run{b})
	}
	return true
}

// pauseKeyOf names job's queue and limit key in keyPausing.
func pauseKeyOf(job *queue.Job) string { return job.Queue + "\x00" + job.LimitKey }

// keyPause is a pause of a limit key a handler here asked for: r is the paused run while
// its call is in flight (nil after), until when the pause ends, released when the call's
// reply came (claims sent since ran in Redis after the pause).
type keyPause struct {
	r               *run
	until, released time.Time
}

// releaseKey hands back the runs holdKey held for r, now that r's pause call ended.
func (l *loop) releaseKey(r *run) {
	if k := pauseKeyOf(r.job); l.keyPausing[k].r == r {
		l.keyPausing[k] = keyPause{until: l.keyPausing[k].until, released: time.Now()}
	}
	if held := l.keyHeld[r]; held != nil {
		delete(l.keyHeld, r)
		l.handBack(held)
	}
}

// pausesKey reports whether a handler's error pauses its job's limit key (PauseKey).
func pausesKey(err error) bool {
	var p *postpone
	return errors.As(err, &p) && p.pauseKey
}

// limitedAcks reports whether a queue near its concurrency limit has acks waiting: their
// jobs are done, yet hold slots of the limit until the acks reach Redis.
func (l *loop) limitedAcks() bool {
	for _, q := range l.queues {
		if l.nearLimit(q) && len(q.acks) > 0 {
			return true
		}
	}
	return false
}

// nearLimit reports whether q's concurrency limit may bind: its last claim left no more
// slots free than this worker has. Far from it (a limit that never binds), acks and
// claims are batched as on any queue.
func (l *loop) nearLimit(q *queueState) bool {
	return q.limit.conc > 0 && q.limit.free <= l.cfg.Concurrency
}
