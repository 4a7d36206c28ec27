package worker

import (
	"context"
	"errors"
	"runtime/debug"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// slot is a goroutine that runs handlers, one job at a time, for the loop: it gets a run
// on in, runs its handler, and posts the outcome on the loop's results. It owns nothing
// else; the loop decides what it runs next.
type slot struct {
	// in is buffered 1 and closed by the loop when the slot must end: at exit, or when the
	// handler of an abandoned run (whose slot was replaced) finally returns.
	in chan *run
}

// outcome is what a handler's attempt gave.
type outcome struct {
	err    error
	result []byte
	took   time.Duration // measured on this worker's clock
	// cause is why the handler's context had ended when it returned (nil: it had not).
	cause error
	// exited: the handler called runtime.Goexit (as t.FailNow does); the slot's goroutine
	// is gone and the loop starts another.
	exited bool
}

// result is a slot's report to the loop.
type result struct {
	slot *slot
	run  *run
	o    outcome
}

// errGoexit is the failure of a handler that called runtime.Goexit instead of returning.
var errGoexit = errors.New("handler called runtime.Goexit (t.FailNow, log.Fatal's cousins) instead of returning")

// attempt is what a handler's context carries for SetResult and Progress: result is
// owned by the slot's goroutine, which reads it after the handler returns; progress is
// safe for any goroutine.
type attempt struct {
	result   []byte
	progress *progressBox
}

type attemptKey struct{}

// SetResult stores data as the job's result, saved with the job when the attempt succeeds
// (`jobs inspect` shows it). Call it from a Handler with the ctx it was given; the last
// call wins. Outside a handler it does nothing.
func SetResult(ctx context.Context, data []byte) {
	if a, ok := ctx.Value(attemptKey{}).(*attempt); ok {
		a.result = data
	}
}

// slotMain is a slot's goroutine.
func (l *loop) slotMain(s *slot) {
	var current *run
	defer func() {
		// Only runtime.Goexit gets here with a run in hand: panics are recovered in call.
		if current != nil {
			l.post(result{slot: s, run: current, o: outcome{err: errGoexit, exited: true,
				took: time.Since(current.started)}})
		}
	}()
	for r := range s.in {
		current = r
		o := l.execute(r)
		current = nil
		l.post(result{slot: s, run: r, o: o})
	}
}

// execute runs one attempt's handler under the job's deadline, with a copy of the job
// (the worker's own holds the lease token), turning a panic into a failure with its stack.
func (l *loop) execute(r *run) outcome {
	a := attempt{progress: r.progress}
	ctx, cancel := context.WithDeadline(context.WithValue(r.ctx, attemptKey{}, &a), r.deadline)
	defer cancel()
	job := *r.job
	job.Lease = ""
	if d := time.Until(r.notBefore); d > 0 {
		// Claimed ahead under the queue's rate: start at the token's instant (at most
		// 20ms away), or give up when the run is stopped before.
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return outcome{err: context.Cause(ctx), cause: context.Cause(ctx)}
		}
	}
	began := time.Now()
	err := call(l.handler, ctx, &job)
	return outcome{err: err, result: a.result, took: time.Since(began), cause: context.Cause(ctx)}
}

// call runs h, turning a panic into a failure with its stack.
func call(h Handler, ctx context.Context, job *queue.Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h.Process(ctx, job)
}
