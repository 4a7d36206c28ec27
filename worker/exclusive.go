package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/lock"
	"github.com/jobs-dev/jobs/queue"
)

// ExclusiveRetryDelay is about how long an exclusive job whose lock is held waits before
// it is tried again (with +-50% jitter, so waiting jobs do not all retry in step).
const ExclusiveRetryDelay = time.Second

// exclusive is the Handler wrapper that runs exclusive jobs (queue.Exclusive) one at a
// time per key, across all workers: under a lock taken with TryLock (never waiting for
// it), extended while the handler runs and released only when the handler returns, even
// if the worker abandoned it meanwhile, so the next job of the key can never run beside
// it. A job whose lock is held is postponed (no attempt counted).
type exclusive struct {
	next   Handler
	locker *lock.Locker
	client *queue.Client
	ttl    time.Duration // the lock's TTL, renewed every third of it
	log    *slog.Logger

	mu     sync.Mutex
	warned time.Time // the last warning that locks cannot be taken (lockFailed)
}

func (e *exclusive) Process(ctx context.Context, job *queue.Job) error {
	if job.Exclusive == "" {
		return e.next.Process(ctx, job)
	}
	lk, err := e.locker.TryLock(ctx, proto.ExclusiveLock(e.client.Config().Prefix, job.Exclusive), e.ttl)
	if errors.Is(err, lock.ErrHeld) {
		return &postpone{after: jittered(ExclusiveRetryDelay), quiet: true,
			reason: fmt.Sprintf("exclusive key %q is held by another job", job.Exclusive)}
	}
	if err != nil {
		return e.lockFailed(ctx, job, err)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Lost (it expired while Redis was unreachable): another worker may start its twin.
	lk.KeepAlive(func(error) { cancel(ErrLockLost) })
	defer func() {
		rctx, stop := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
		defer stop()
		if err := lk.Release(rctx); err != nil && !errors.Is(err, lock.ErrLost) {
			e.log.With(jobAttrs(job)...).LogAttrs(rctx, slog.LevelWarn, "cannot release exclusive lock; it expires by itself",
				slog.String("error", err.Error()))
		}
	}()
	return e.next.Process(lctx, job)
}

// lockFailed postpones an exclusive job whose lock Redis would not let it take (a full
// Redis refuses the lock's SET NX with OOM; a connection lost): about a second for the
// job's first 10 postponements, then doubling up to 30 s, as the failure is likely to
// last, each logged at Debug, and one warning a minute for the worker. Every exclusive
// job met the refusal at each of its claims: 200 of them on a full Redis made 220 Info
// lines a second.
func (e *exclusive) lockFailed(ctx context.Context, job *queue.Job, err error) error {
	now := time.Now()
	e.mu.Lock()
	warn := now.Sub(e.warned) >= time.Minute
	if warn {
		e.warned = now
	}
	e.mu.Unlock()
	if warn {
		e.log.LogAttrs(ctx, slog.LevelWarn, "cannot take exclusive locks: postponing exclusive jobs until Redis takes them",
			slog.String("error", err.Error()), slog.String(attrQueue, job.Queue))
	}
	return &postpone{after: jittered(growing(job.Postponed, ExclusiveRetryDelay, ExclusiveRetryDelay, 30*time.Second)), quiet: true,
		reason: fmt.Sprintf("exclusive key %q: cannot take its lock: %v", job.Exclusive, err)}
}

// postpone is a handler's outcome that gives the job back unrun, to run again after a
// delay without counting an attempt: an exclusive job whose lock is held, or a job type
// this worker has no handler for.
type postpone struct {
	after  time.Duration
	reason string // becomes the job's last_error when not empty
	quiet  bool   // expected contention: logged at Debug
	snooze bool   // the handler asked for it (Snooze)
	// pauseKey: the handler asked to pause the job's limit key (PauseKey).
	pauseKey bool
}

func (p *postpone) Error() string {
	if p.snooze {
		return fmt.Sprintf("snoozed for %s", p.after)
	}
	return "postponed: " + p.reason
}
