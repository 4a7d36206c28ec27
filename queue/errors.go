package queue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors callers branch on with errors.Is.
var (
	// ErrDuplicate: a job with the same ID already exists in the queue. Enqueue returns the
	// existing job's ID with it.
	ErrDuplicate = errors.New("queue: duplicate job")
	// ErrNotFound: no job with that ID (it never existed, or its retention ran out).
	ErrNotFound = errors.New("queue: job not found")
	// ErrLeaseLost: a worker's lease on a job is gone (it expired and the job was put
	// back or claimed again), so what the worker reported was refused. Nothing was changed.
	ErrLeaseLost = errors.New("queue: lease lost")
	// ErrPayloadTooLarge: the payload is over Config.MaxPayload; the message gives both sizes.
	ErrPayloadTooLarge = errors.New("queue: payload too large")
	// ErrCancelled: the job was cancelled by an operator ([Client.Cancel], `jobs cancel`);
	// it is now dead. A worker reporting on a cancelled job gets it, whatever the handler
	// did: a cancel is final.
	ErrCancelled = errors.New("queue: job cancelled")
	// ErrInvalid: an argument is malformed (queue name, job type, ID, option); the message
	// names it.
	ErrInvalid = errors.New("queue: invalid argument")
	// ErrNoProcess: no live worker or scheduler has that ID in the registry ([Client.Quiet],
	// [Client.Stop]): it never ran, it stopped, or it died more than three beats ago.
	ErrNoProcess = errors.New("queue: no live process with that ID")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// settled maps the per-job code of the scripts that settle a claimed job (ack, ackclaim,
// handback) to its error: 1 settled, 2 settled already by this lease (a resent call),
// 3 cancelled (now dead), 0 lease lost.
func settled(code int64) error {
	switch code {
	case 1, 2:
		return nil
	case 3:
		return ErrCancelled
	case 0:
		return ErrLeaseLost
	}
	return fmt.Errorf("%w: code %d", errBadReply, code)
}

// ErrUncertain: a call was sent to Redis but its reply never came (the context ended, the
// connection broke, a timeout passed), so what it did is unknown: the job may or may not
// have been enqueued, the ack may or may not have been applied, the operator's change
// (Cancel, Retry, RetryAllDead, Delete, Purge, Pause, Resume, SetLimit and the other
// limit calls, Quiet, Stop, Audit) may or may not have been made. The error wraps the cause
// too, so errors.Is(err, context.DeadlineExceeded) also holds. A context that ended before
// the call was sent gives its plain error instead (context.Canceled,
// context.DeadlineExceeded): nothing was written.
//
// To settle it: [Client.Get] with the job's ID (Enqueue returns the ID with this error),
// or enqueue it again with [ID]: ErrDuplicate then means the first call wrote it.
var ErrUncertain = errors.New("queue: outcome unknown (sent, no reply)")

// outcome wraps err, the error of a script call of op, as its caller should see it: a
// Redis error reply (the scripts write nothing when they reply an error), or a failure
// before anything was sent, stays a plain error; anything else (a lost connection, a
// timeout, a context that ended in flight) may have come after the script ran, and wraps
// ErrUncertain and, when ctx ended, ctx's error.
func outcome(ctx context.Context, op string, err error) error {
	if notSent(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	cerr := ctxEnded(ctx)
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%s: %w: %w (%w)", op, ErrUncertain, cerr, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrUncertain, err)
}

// sent runs do, one script call of op that changes something (an operator's call: Retry,
// Cancel, Pause, SetLimit, Purge, ...), and returns its error as outcome does, wrapping
// ErrUncertain when the call may have run; a ctx that had ended before the call gives
// its plain error (nothing was sent).
func sent(ctx context.Context, op string, do func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := do(); err != nil {
		return outcome(ctx, op, err)
	}
	return nil
}

// notSent reports whether err proves that the call did not run: an error reply from Redis,
// or a failure to get a connection.
func notSent(err error) bool {
	var re redis.Error
	var op *net.OpError
	return errors.As(err, &re) || errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.As(err, &op) && op.Op == "dial"
}

// ctxEnded is ctx's error when ctx has ended, or context.DeadlineExceeded when its
// deadline has passed and its timer has not marked it done yet: go-redis sets the
// connection's read deadline to ctx's (ContextTimeoutEnabled), so its i/o timeout can come
// that moment before ctx.Err does. nil while ctx runs.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
