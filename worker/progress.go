package worker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// Progress reports how far the job whose handler got ctx has got: percent from 0 to 100
// (a value outside is clamped) and a short message (cut to 200 bytes). `jobs inspect`
// and queue's Client.Get show the latest value as progress, progress_msg and progress_at.
//
// Progress never blocks and costs no Redis call of its own: the latest value wins, and
// the worker sends the values of all its jobs that have new ones at most once a second
// in one call per queue (with the lease heartbeat when one is due), and once more when
// the handler returns, before its outcome is recorded. Only the holder of the job's
// lease can write it: once a worker lost the lease, its handler's progress is dropped.
// Call it from a Handler, or any goroutine it started, with the ctx it was given;
// elsewhere it does nothing.
func Progress(ctx context.Context, percent int, message string) {
	if a, ok := ctx.Value(attemptKey{}).(*attempt); ok && a.progress != nil {
		a.progress.set(percent, message)
	}
}

// progressEvery is the shortest time between two progress calls of a worker.
const progressEvery = time.Second

// progressBox holds the latest progress a handler reported. The handler writes it, from
// any goroutine, and the loop reads it when it sends: an atomic pointer, so the handler
// never waits for the loop, and a doorbell (the loop's, buffered 1) that tells the loop
// there is something to send without a goroutine or a blocked send per report. rung (the
// loop's) is set by the first report after a send: later ones do not wake the loop, so
// handlers reporting at 10 Hz cost the loop one wakeup a second, not one per report.
type progressBox struct {
	latest atomic.Pointer[proto.Progress]
	bell   chan<- struct{}
	rung   *atomic.Bool
}

func (b *progressBox) set(percent int, message string) {
	b.latest.Store(&proto.Progress{Percent: min(max(percent, 0), 100), Message: proto.CutProgressMessage(message)})
	if b.rung.Swap(true) {
		return // the loop has a send planned, and reads latest after clearing rung
	}
	select {
	case b.bell <- struct{}{}:
	default:
	}
}

// progressState is the loop's side of progress.
type progressState struct {
	bell chan struct{} // buffered 1: a handler reported progress
	rung atomic.Bool   // see progressBox
	due  time.Time     // when to send the progress waiting; zero: none waits
	last time.Time     // when progress was last sent with a periodic call or a heartbeat
	// closing: runs whose handler returned with progress not sent yet; it is sent before
	// their outcome is recorded (after that the lease is ended, and the script would
	// refuse it).
	closing     []closing
	closingSent bool // a call sending closing runs' progress is in flight
}

type closing struct {
	r *run
	o outcome
}

// unsent returns the progress r's handler reported and that was not sent yet, or nil.
func (r *run) unsent() *proto.Progress {
	if r.progress == nil {
		return nil
	}
	if p := r.progress.latest.Load(); p != r.progressSent {
		return p
	}
	return nil
}

// progressRang plans the send of the progress just reported: now, or a second after the
// last send.
func (l *loop) progressRang(now time.Time) {
	if l.prog.due.IsZero() {
		l.prog.due = maxTime(now, l.prog.last.Add(progressEvery))
	}
}

// progressStep sends what is due: the progress of runs whose handler returned (at once,
// their outcome waits for it), and the periodic send.
func (l *loop) progressStep(now time.Time) {
	if len(l.prog.closing) > 0 && !l.prog.closingSent {
		l.sendClosing()
	}
	if l.prog.due.IsZero() || now.Before(l.prog.due) {
		return
	}
	if next := l.prog.last.Add(progressEvery); now.Before(next) {
		l.prog.due = next // a heartbeat carried progress meanwhile
		return
	}
	if len(l.runs) > len(l.buffer) && l.nextBeat.Sub(now) < progressEvery {
		// The heartbeat is due within the second: it carries the progress.
		l.prog.due = l.nextBeat
		return
	}
	l.prog.due = time.Time{}
	l.prog.rung.Store(false) // before reading the boxes: a report after this rings again
	byQueue := map[*queueState][]*run{}
	for _, r := range l.runs {
		if r.state != running || r.unsent() == nil || errors.Is(r.cause, ErrLeaseLost) {
			continue
		}
		if r.q.beating {
			l.prog.due = now.Add(progressEvery) // its reply may come any moment; look again then
			continue
		}
		byQueue[r.q] = append(byQueue[r.q], r)
	}
	for q, runs := range byQueue {
		l.beat(q, runs, now)
	}
}

// takeProgress returns the progress of runs not sent yet (nil when there is none) and
// marks it sent. Only running runs' progress goes, unless final: a run whose handler
// returned sends its last progress with sendClosing, before its outcome.
func (l *loop) takeProgress(runs []*run, now time.Time, final bool) []*proto.Progress {
	var out []*proto.Progress
	for i, r := range runs {
		if r.state != running && !final {
			continue
		}
		if p := r.unsent(); p != nil {
			if out == nil {
				out = make([]*proto.Progress, len(runs))
			}
			out[i], r.progressSent = p, p
			r.progressBeats++ // until progressAnswered
		}
	}
	if out != nil && !final {
		// Final sends do not count: with short jobs ending all the time they would
		// hold back the running jobs' progress forever.
		l.prog.last = now
	}
	return out
}

// progressAnswered takes the reply of a call that carried progress: what it carried is
// written, or, when it failed, unsent again, so the next send carries it unless the
// handler reported a newer one.
func (l *loop) progressAnswered(runs []*run, sent []*proto.Progress, err error, now time.Time) {
	for i, p := range sent {
		if p == nil {
			continue
		}
		r := runs[i]
		r.progressBeats--
		switch {
		case err == nil:
			r.progressAcked = p
		case r.progressSent == p:
			r.progressSent = nil
			l.progressRang(now)
		}
	}
}

// unconfirmed returns the progress r's handler reported last if Redis has not
// acknowledged it yet, or nil.
func (r *run) unconfirmed() *proto.Progress {
	if r.progress == nil {
		return nil
	}
	if p := r.progress.latest.Load(); p != r.progressAcked {
		return p
	}
	return nil
}

// closeProgress holds back the outcome of r, whose handler returned with progress Redis
// has not acknowledged, until it has; it reports whether it did. An outcome recorded
// first would end the lease, and the script would then refuse the progress. A run that
// lost its lease has nothing to send: the script would refuse it.
func (l *loop) closeProgress(r *run, o outcome) bool {
	if r.unconfirmed() == nil || errors.Is(o.cause, ErrLeaseLost) {
		return false
	}
	l.prog.closing = append(l.prog.closing, closing{r, o})
	return true
}

// sendClosing sends the final progress of the runs whose handler returned, one call per
// queue, then records their outcomes. A run whose progress is in flight in a heartbeat
// waits for its reply first: two calls in flight may run in either order, and the older
// value must not land last. Best effort: a call that fails loses the progress, not the
// outcome.
func (l *loop) sendClosing() {
	var batch, wait []closing
	for _, c := range l.prog.closing {
		switch {
		case c.r.progressBeats > 0:
			wait = append(wait, c)
		case c.r.unconfirmed() == nil:
			l.settleOutcome(c.r, c.o) // the heartbeat's reply confirmed it
		default:
			batch = append(batch, c)
		}
	}
	l.prog.closing = wait
	if len(batch) == 0 {
		return
	}
	l.prog.closingSent = true
	l.calls++
	byQueue := map[string][]*run{}
	for _, c := range batch {
		byQueue[c.r.q.name] = append(byQueue[c.r.q.name], c.r)
	}
	type sent struct {
		jobs     []*queue.Job
		progress []*proto.Progress
	}
	calls := map[string]sent{}
	now := time.Now()
	for q, runs := range byQueue {
		s := sent{jobs: make([]*queue.Job, len(runs)), progress: l.takeProgress(runs, now, true)}
		for i, r := range runs {
			s.jobs[i] = r.job
		}
		calls[q] = s
	}
	go func() {
		ctx, cancel := context.WithTimeout(l.bg, min(l.cfg.Lease/4, reportTimeout))
		defer cancel()
		errs := map[string]error{}
		for q, s := range calls {
			// Lost tokens need no action here: the outcome's own call reports them.
			_, _, errs[q] = l.w.broker.HeartbeatProgress(ctx, q, l.cfg.Lease, s.jobs, s.progress)
		}
		l.postEvent(func() {
			l.calls--
			l.prog.closingSent = false
			for q, s := range calls {
				l.progressAnswered(byQueue[q], s.progress, errs[q], time.Now())
			}
			for _, c := range batch {
				l.settleOutcome(c.r, c.o)
			}
		})
	}()
}

// Exec handlers report progress by writing lines "PERCENT [MESSAGE]" to file descriptor
// 3 (JOB_PROGRESS_FD).

// progressLineMax bounds one progress line of an exec handler; a longer line is ignored.
const progressLineMax = 4 << 10

// progressDrain is how long an exec handler's progress pipe is still read once its
// program has exited: what the program wrote is in the pipe already, and a process it
// left behind holding the pipe must not hold the job.
const progressDrain = 100 * time.Millisecond

// readProgress reads progress lines from r until it ends, reporting each good one with
// Progress. Bad lines (no number from 0 to 100 first, or longer than progressLineMax
// bytes) are ignored.
func readProgress(ctx context.Context, r io.Reader) {
	br := bufio.NewReaderSize(r, progressLineMax)
	skipping := false // inside a line too long to keep
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			skipping = true
			continue
		}
		if !skipping && len(line) > 0 {
			if pct, msg, ok := parseProgress(string(line)); ok {
				Progress(ctx, pct, msg)
			}
		}
		skipping = false // a long line ends with this read
		if err != nil {
			return
		}
	}
}

// parseProgress parses one progress line: a number from 0 to 100 (a fraction is dropped;
// a trailing % is allowed), then optionally blanks and a message.
func parseProgress(line string) (int, string, bool) {
	line = strings.TrimSpace(line)
	num, msg := line, ""
	if i := strings.IndexAny(line, " \t"); i >= 0 {
		num, msg = line[:i], strings.TrimSpace(line[i+1:])
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(num, "%"), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
		return 0, "", false
	}
	return int(f), msg, true
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
