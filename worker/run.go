package worker

import (
	"cmp"
	"context"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// runState is where one claimed attempt of a job is in its life on this worker. Only the
// worker's loop reads or changes it (see loop.go); every transition is a method below.
//
//	claimed ──► buffered ──► running ──► settling ──► (gone: done, failed, handed back)
//	   │           │            │            ▲
//	   │           └─hand back──┼────────────┘ (stale, shutdown, cancelled)
//	   └──(stopping: hand back)─┘
//	                            └──► abandoned (its handler ignored the end of its context:
//	                                 the attempt is failed; a late outcome is dropped)
type runState uint8

const (
	// claimed: in a claim reply the loop has not placed yet (held back until every earlier
	// claim on its queue has replied, so jobs start in claim order).
	claimed runState = iota
	// buffered: claimed ahead of a free slot; its lease runs, so it is handed back,
	// uncounted, if it waits staleAfter.
	buffered
	// running: a slot runs its handler.
	running
	// settling: its handler returned (or it never ran); its outcome is being recorded in
	// Redis (an ack waits for the next exchange call of its queue).
	settling
	// abandoned: its handler did not return within Config.AbandonGrace of its context
	// ending. The attempt was settled as failed and its slot replaced; the handler's
	// goroutine, which cannot be killed, may still return, and its outcome is dropped.
	abandoned
)

var stateNames = [...]string{"claimed", "buffered", "running", "settling", "abandoned"}

func (s runState) String() string { return stateNames[s] }

// run is one claimed attempt of a job on this worker.
type run struct {
	job   *queue.Job
	q     *queueState
	state runState

	// renewed is when the call that last renewed the lease was sent (the claim, then each
	// heartbeat): Redis set the lease deadline no earlier than renewed + Lease.
	renewed time.Time
	// claimed is when the claim was sent: job.StartedAt, Redis's time of the claim, is
	// about then (see observeHistory).
	claimed time.Time
	// notBefore, when set, is when the handler may start at the earliest: the job was
	// claimed ahead under its queue's rate, and starts at its token's instant (StartedAt,
	// Redis's time). Measured on this worker's monotonic clock from the claim's reply, by
	// the gap between the two Redis times, so that no clock but Redis's counts and the
	// start is never early: the reply came after the claim ran.
	notBefore time.Time

	// Set when a slot starts it.
	slot      *slot
	ctx       context.Context // the handler's, before its deadline is applied (see slot.run)
	cancel    context.CancelCauseFunc
	started   time.Time
	deadline  time.Time // started + the job's timeout
	cause     error     // why the loop cancelled ctx; nil while it has not
	abandonAt time.Time // deadline + AbandonGrace, or AbandonGrace after the loop cancelled it
	index     int       // in the loop's timers heap; -1 when not in it

	// Set when its handler returned successfully, for the ack.
	result []byte
	took   time.Duration

	// progress is what its handler reports (set when it starts); progressSent the value
	// last sent or being sent, progressAcked the last one Redis answered, progressBeats
	// the calls carrying its progress still in flight (see progress.go).
	progress      *progressBox
	progressSent  *proto.Progress
	progressAcked *proto.Progress
	progressBeats int

	// cancelled: an operator cancelled the job (heartbeat or notice); its outcome goes to
	// dead whatever it is (the scripts see the job's cancel field).
	cancelled bool
}

// checkAt is when the loop must next look at a running run: its abandonment, or the lease
// watchdog, which cancels the handler before the lease can expire in Redis and the job be
// taken over, however long Redis stays unreachable.
func (r *run) checkAt(lease time.Duration) time.Time {
	if r.cause == nil {
		if w := r.watchdogAt(lease); w.Before(r.abandonAt) {
			return w
		}
	}
	return r.abandonAt
}

// watchdogAt is when the handler is cancelled if no renewal came: a sixth of the lease
// before it can expire, so the handler has that long to stop before another worker may
// take the job (two heartbeats, at a third and two thirds of the lease, have failed).
func (r *run) watchdogAt(lease time.Duration) time.Time {
	return r.renewed.Add(lease - lease/6)
}

// start moves a claimed or buffered run to running on slot s, with the handler context's
// parent and cancel function made by the loop.
func (r *run) start(s *slot, ctx context.Context, cancel context.CancelCauseFunc, now time.Time, grace time.Duration,
	policy TypePolicy) {
	timeout := cmp.Or(policy.Timeout, r.job.Timeout, queue.DefaultTimeout)
	r.state, r.slot, r.ctx, r.cancel, r.started = running, s, ctx, cancel, now
	r.deadline = now.Add(timeout)
	r.abandonAt = r.deadline.Add(grace)
}

// stop cancels a running handler's context with cause; the first cause wins, and the
// handler has AbandonGrace from now to return.
func (r *run) stop(cause error, now time.Time, grace time.Duration) {
	if r.state != running || r.cause != nil {
		return
	}
	r.cause = cause
	r.cancel(cause)
	if at := now.Add(grace); at.Before(r.abandonAt) {
		r.abandonAt = at
	}
}

// returned moves a running run to settling: its handler gave an outcome.
func (r *run) returned(o outcome) {
	r.state, r.result, r.took = settling, o.result, o.took
	if r.cancel != nil {
		r.cancel(nil) // frees the context's resources; the handler has returned
	}
}

// abandon marks a running run whose handler did not return in time.
func (r *run) abandon() { r.state = abandoned }

// timers is a heap of running runs by checkAt.
type timers struct {
	runs  []*run
	lease time.Duration
}

func (t *timers) Len() int { return len(t.runs) }
func (t *timers) Less(i, j int) bool {
	return t.runs[i].checkAt(t.lease).Before(t.runs[j].checkAt(t.lease))
}
func (t *timers) Swap(i, j int) {
	t.runs[i], t.runs[j] = t.runs[j], t.runs[i]
	t.runs[i].index, t.runs[j].index = i, j
}
func (t *timers) Push(x any) {
	r := x.(*run)
	r.index = len(t.runs)
	t.runs = append(t.runs, r)
}
func (t *timers) Pop() any {
	r := t.runs[len(t.runs)-1]
	t.runs[len(t.runs)-1] = nil
	t.runs = t.runs[:len(t.runs)-1]
	r.index = -1
	return r
}
