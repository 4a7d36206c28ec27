package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// How slots, the claim-ahead buffer and the two carrier loops share the work:
//
//   - A slot is a goroutine running handlers, one job after another: when its job
//     succeeds it posts the ack for the loops and takes the next buffered job itself, so
//     a busy worker starts jobs without waiting for any round trip. A slot whose job
//     failed records the failure itself (rare, and it needs the outcome) and ends.
//   - The fetch loop and the help loop carry the acks of all slots and refill them, each
//     round one script call per queue (queue.Client.AckClaim): one round trip per batch
//     of completions, not two per job. Two loops, so that one's call runs in Redis while
//     the other's reply is unpacked here; each reserves the room it claims for. Only the
//     fetch loop waits for work, promotes, reaps and backs off on errors.
//   - While handlers are short, the loops claim more jobs than there are free slots and
//     keep them in the buffer, so a slot that frees finds its next job at hand. A buffered job is active in Redis (its attempt counted, its lease running),
//     so the buffer is kept only while handlers are short, and a buffered job that waited
//     staleAfter is handed back uncounted, as are all buffered jobs on shutdown.

// claimed is a job this worker claimed and has not started yet.
type claimed struct {
	job *queue.Job
	at  time.Time // when the claim was sent: its lease began no earlier
}

// finished is a job whose handler succeeded, waiting for the fetch loop to ack it.
type finished struct {
	job    *queue.Job
	result []byte
	took   time.Duration
}

// slots is the worker's bookkeeping of slots, buffered jobs and pending acks.
type slots struct {
	concurrency int
	aheadUntil  time.Duration // claim ahead only while handlers average less
	staleAfter  time.Duration // a buffered job older than this is handed back

	mu       sync.Mutex
	busy     int       // slots running a job
	buffer   []claimed // claimed ahead, oldest first
	stale    []claimed // buffered jobs a slot found stale, to hand back
	acks     []finished
	reserved int  // jobs being claimed by a call in flight (see reserve)
	stopping bool // no buffered job may start any more
	avg      time.Duration
	// freed and help (each buffered 1) wake the fetch loop and the help loop: a slot came
	// free, an ack or a stale job waits.
	freed, help chan struct{}
	// dry is set while the fetch loop found nothing to claim and waits to be woken: the
	// help loop then only carries acks.
	dry atomic.Bool
}

func newSlots(concurrency int, lease time.Duration) *slots {
	until := min(lease/40, 125*time.Millisecond)
	return &slots{
		concurrency: concurrency,
		aheadUntil:  until,
		staleAfter:  min(lease/10, 500*time.Millisecond),
		// Unknown handlers are assumed slow until a few have been timed, so a worker of
		// long jobs never buffers.
		avg:   until,
		freed: make(chan struct{}, 1),
		help:  make(chan struct{}, 1),
	}
}

func (s *slots) signal() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
	select {
	case s.help <- struct{}{}:
	default:
	}
}

// reserve returns how many jobs to claim, the free slots plus the buffer's room while
// handlers are short, and reserves them for the caller's claim until it places what it
// got (see place), so the two loops do not both claim for the same room.
func (s *slots) reserve() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return 0
	}
	n := s.concurrency - s.busy - len(s.buffer) - s.reserved
	if s.avg < s.aheadUntil {
		n += s.ahead()
	}
	n = max(n, 0)
	s.reserved += n
	return n
}

// ahead is the buffer's size while handlers are short: enough jobs that the slots do
// not run dry during one round trip of the fetch loop, and large batches (each script
// call has a fixed cost, in Redis and here), but few enough that a buffered job waits
// only about a quarter of staleAfter at the average handler time.
func (s *slots) ahead() int {
	most := max(s.concurrency, aheadMin)
	if s.avg <= 0 {
		return most
	}
	return int(min(int64(most), int64(s.concurrency)*int64(s.staleAfter/4)/int64(s.avg)))
}

// aheadMin is the buffer's size at low concurrency (while handlers are short): a worker of
// concurrency 10 claims up to 64 jobs per round trip, not 10.
const aheadMin = 64

// place gives claimed jobs to free slots and buffers the rest, ending the reservation
// of the claim that got them. It returns the jobs to start, one new slot each.
func (s *slots) place(jobs []*queue.Job, at time.Time, reserved int) (start []claimed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved -= reserved
	for _, j := range jobs {
		c := claimed{j, at}
		if s.busy < s.concurrency && !s.stopping {
			s.busy++
			start = append(start, c)
		} else {
			s.buffer = append(s.buffer, c)
		}
	}
	return start
}

// next gives a slot whose job succeeded its next job. ok is false when there is none: the
// slot is then free. Buffered jobs found stale on the way are set aside for hand back.
func (s *slots) next(now time.Time) (c claimed, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.buffer) > 0 && !s.stopping {
		c, s.buffer = s.buffer[0], s.buffer[1:]
		if now.Sub(c.at) < s.staleAfter {
			return c, true
		}
		s.stale = append(s.stale, c)
		s.slowed()
		s.signal()
	}
	s.busy--
	s.signal()
	return claimed{}, false
}

// release frees a slot whose job will not be followed by a buffered one (its outcome is
// being recorded by the slot itself).
func (s *slots) release() {
	s.mu.Lock()
	s.busy--
	s.mu.Unlock()
	s.signal()
}

// timed records a handler's duration: a moving average decides whether to claim ahead.
func (s *slots) timed(took time.Duration) {
	s.mu.Lock()
	s.avg += (took - s.avg) / 8
	s.mu.Unlock()
}

// slowed stops claiming ahead (until handlers are timed short again) when a buffered job
// went stale: the average was too optimistic, as handlers still running are not in it.
func (s *slots) slowed() {
	s.avg = max(s.avg, s.aheadUntil)
}

// ack queues a succeeded job's ack for the fetch loop.
func (s *slots) ack(f finished) {
	s.mu.Lock()
	s.acks = append(s.acks, f)
	s.mu.Unlock()
	s.signal()
}

func (s *slots) hasAcks() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acks) > 0
}

// takeAcks returns the acks waiting to be sent.
func (s *slots) takeAcks() []finished {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.acks
	s.acks = nil
	return a
}

// takeStale removes the buffered jobs that waited staleAfter (all of them once stopping)
// and returns them with the time the next one goes stale (zero: the buffer is empty).
func (s *slots) takeStale(now time.Time) (old []claimed, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, s.stale = s.stale, nil
	for len(s.buffer) > 0 && (s.stopping || now.Sub(s.buffer[0].at) >= s.staleAfter) {
		old = append(old, s.buffer[0])
		s.buffer = s.buffer[1:]
		s.slowed()
	}
	if len(s.buffer) > 0 {
		next = s.buffer[0].at.Add(s.staleAfter)
	}
	return old, next
}

// start undoes stop, for a Worker run again.
func (s *slots) start() {
	s.mu.Lock()
	s.stopping = false
	s.mu.Unlock()
}

// stop lets no buffered job start any more.
func (s *slots) stop() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
}

func (s *slots) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

// slot runs c, then the buffered jobs that follow it, until the buffer is empty or a job
// fails (the slot then records the failure itself and ends).
func (w *Worker) slot(jobsCtx context.Context, c claimed, jobs *sync.WaitGroup) {
	for {
		kept, abandoned := w.execute(jobsCtx, c)
		if abandoned {
			return // its slot was freed and jobs.Done called when it was abandoned
		}
		var ok bool
		if kept {
			c, ok = w.slots.next(time.Now())
		}
		if !ok {
			w.metrics.setBusy(int64(w.slots.running()))
			jobs.Done()
			return
		}
	}
}

// start runs claimed jobs: each free slot gets one, the rest wait in the buffer. reserved
// is what the claim reserved (see slots.reserve).
func (w *Worker) start(jobsCtx context.Context, got []*queue.Job, at time.Time, reserved int, jobs *sync.WaitGroup) {
	start := w.slots.place(got, at, reserved)
	if len(start) > 0 {
		w.metrics.setBusy(int64(w.slots.running()))
	}
	for _, c := range start {
		jobs.Add(1)
		go w.slot(jobsCtx, c, jobs)
	}
}

// handBackStale hands back the buffered jobs that waited too long (all of them once the
// worker is stopping), uncounted, so another worker or slot runs them at once. It returns
// when the next buffered job goes stale (zero: none is buffered).
func (w *Worker) handBackStale(ctx context.Context) time.Time {
	old, next := w.slots.takeStale(time.Now())
	if len(old) == 0 {
		return next
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	for _, c := range old {
		err := w.client.HandBack(rctx, c.job, 0)
		switch {
		case errors.Is(err, queue.ErrLeaseLost):
		case err != nil:
			w.jobLog(c.job).LogAttrs(rctx, slog.LevelWarn,
				"cannot hand back a buffered job; it will be retried after its lease",
				slog.String("error", err.Error()))
		}
	}
	return next
}

// jobLog returns the worker's logger with a job's attributes. Built only when something is
// logged: the happy path of a job logs nothing unless Debug is enabled.
func (w *Worker) jobLog(job *queue.Job) *slog.Logger {
	return w.log.With(slog.String(attrJobID, job.ID), slog.String(attrJobType, job.Type),
		slog.String(attrQueue, job.Queue), slog.Int(attrAttempt, job.Attempt))
}
