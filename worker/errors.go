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

// The causes a job's context is cancelled with besides its timeout (context.Cause).
var (
	errLeaseLost = errors.New("worker: lease lost")
	// errLeaseExpiring: the lease could not be renewed (Redis unreachable) and would
	// expire soon, after which another worker may run the job.
	errLeaseExpiring = errors.New("worker: lease could not be renewed")
	errLockLost      = errors.New("worker: exclusive lock lost")
	errCancelled     = errors.New("cancelled by operator")
	errShutdown      = errors.New("worker: shutting down")
)

// errAbandoned is the failure recorded for a handler that did not return within grace of
// its context ending.
func errAbandoned(grace time.Duration) error {
	return fmt.Errorf("handler abandoned: it did not return within %s of its context ending", grace)
}

// panicError is a handler panic turned into a failure, with its stack for last_error.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.value, e.stack) }
