package worker

import (
	"errors"
	"fmt"
	"time"
)

// skipRetry marks an error after which retrying is pointless.
type skipRetry struct{ err error }

func (e *skipRetry) Error() string { return "skip retry: " + e.err.Error() }
func (e *skipRetry) Unwrap() error { return e.err }

// SkipRetry wraps err so the job goes to the dead set at once instead of being retried:
// return it for input that can never succeed (a malformed payload, a deleted account).
func SkipRetry(err error) error {
	if err == nil {
		err = errors.New("skip retry")
	}
	return &skipRetry{err}
}

// IsSkipRetry reports whether err, or an error it wraps, came from SkipRetry.
func IsSkipRetry(err error) bool {
	var s *skipRetry
	return errors.As(err, &s)
}

// retryRequested is a failure the handler asked for (an exec handler's exit code 75,
// EX_TEMPFAIL): retried with backoff like any failure and counted against max_retry, so
// it cannot loop forever, but logged as a retry rather than an error.
type retryRequested struct{ msg string }

func (e *retryRequested) Error() string { return e.msg }

// The causes a handler's context is cancelled with besides its timeout (whose cause is
// context.DeadlineExceeded): context.Cause(ctx) returns one of them, for errors.Is.
var (
	// ErrLeaseLost: the worker lost the job's lease (it expired and another worker took
	// the job); nothing this attempt reports will be accepted.
	ErrLeaseLost = errors.New("worker: lease lost")
	// ErrLeaseExpiring: the lease could not be renewed (Redis unreachable) and would
	// expire soon, after which another worker may run the job.
	ErrLeaseExpiring = errors.New("worker: lease could not be renewed")
	// ErrLockLost: an exclusive job's lock could not be kept.
	ErrLockLost = errors.New("worker: exclusive lock lost")
	// ErrCancelled: an operator cancelled the job (`jobs cancel`, queue.Client.Cancel).
	ErrCancelled = errors.New("cancelled by operator")
	// ErrShutdown: the worker is stopping and its shutdown timeout ran out; the job is
	// handed back unrun-to-the-end, its attempt not counted.
	ErrShutdown = errors.New("worker: shutting down")
)

// errAbandoned is the failure recorded for a handler that did not return within grace of
// its context ending.
func errAbandoned(grace time.Duration) error {
	return fmt.Errorf("handler abandoned: it did not return within %s of its context ending", grace)
}

// PanicError is a handler's panic, turned into a failed attempt: its message, kept as the
// job's last_error, is the panic value and then the stack. Config.OnError gets it as the
// error (errors.As finds it).
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the panicking goroutine's stack (runtime/debug.Stack)
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }

// Snooze returns the error by which a handler says "not now": the job runs again after d
// (at least a millisecond), as if it had not run: the attempt is not counted against its
// max retry (its Postponed count goes up instead) and its last error is kept. Use it for
// a resource that is busy or a rate limit met; return an error for a failure. An exec
// handler snoozes by exiting with ExitSnooze.
//
// A job snoozed again and again for less than a second (d of 0, or a time already past)
// waits what it asks its first 10 times, then at least 10 ms, doubled each time up to a
// second: a handler that keeps snoozing for nothing settles at one run a second instead
// of hundreds.
func Snooze(d time.Duration) error {
	return &postpone{after: max(d, time.Millisecond), snooze: true}
}

// RetryAfter is Snooze under the name of the HTTP header, for a handler whose upstream
// answered "429 Too Many Requests, Retry-After: d": the job runs again after d, the
// attempt not counted (it is exactly Snooze). An exec handler does the same by printing
// the delay as its stdout's last line ("30s", or "30" seconds, as Retry-After gives it)
// and exiting with ExitSnooze (76). For a limit every job of a queue must keep, set it on
// the queue (queue.Client.SetLimit): workers then claim no job the limit would not let
// run.
func RetryAfter(d time.Duration) error { return Snooze(d) }

// PauseKey returns the error by which a handler says "not now" for every job of this
// job's limit key (see queue.LimitKey): no job of the key starts anywhere for d (at least
// a millisecond), and this one runs again first when the pause ends, its attempt not
// counted, as with Snooze. Other keys and jobs without a key run on. For an upstream that
// answered 429 for one customer. A job without a limit key is snoozed for d. An exec
// handler does the same by printing the delay as its stdout's last line and exiting with
// ExitPauseKey (77).
func PauseKey(d time.Duration) error {
	return &postpone{after: max(d, time.Millisecond), snooze: true, pauseKey: true,
		reason: fmt.Sprintf("limit key paused for %s", max(d, time.Millisecond))}
}

// IsSnooze reports whether err, or an error it wraps, came from Snooze or RetryAfter.
func IsSnooze(err error) bool {
	var p *postpone
	return errors.As(err, &p) && p.snooze
}
