package queue

import (
	"errors"
	"fmt"
)

// Errors callers branch on with errors.Is.
var (
	// ErrDuplicate: a job with the same ID already exists in the queue. Enqueue returns the
	// existing job's ID with it.
	ErrDuplicate = errors.New("queue: duplicate job")
	// ErrNotFound: no job with that ID (it never existed, or its retention ran out).
	ErrNotFound = errors.New("queue: job not found")
	// ErrLeaseLost: the caller's lease on a job is gone (it expired and the job was reaped
	// or claimed again). Nothing was changed.
	ErrLeaseLost = errors.New("queue: lease lost")
	// ErrPayloadTooLarge: the payload is over Config.MaxPayload; the message gives both sizes.
	ErrPayloadTooLarge = errors.New("queue: payload too large")
	// ErrCancelled: the job was cancelled by an operator ([Client.Cancel], `jobs cancel`);
	// it is now dead. Ack, AckClaim, HandBack and Postpone return it for a cancelled job:
	// a cancel is final, whatever its handler did.
	ErrCancelled = errors.New("queue: job cancelled")
	// ErrInvalid: an argument is malformed (queue name, job type, ID, option); the message
	// names it.
	ErrInvalid = errors.New("queue: invalid argument")
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
