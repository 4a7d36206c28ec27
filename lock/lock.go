// Package lock is a thin wrapper over redsync (github.com/go-redsync/redsync/v4) on one
// Redis: try-locks with a TTL that never block, extension while held, and errors that
// say whether the lock is held elsewhere or Redis failed. There is no hidden retry loop:
// a caller that finds a lock held decides itself what to do.
package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

var (
	// ErrHeld: someone else holds the lock.
	ErrHeld = errors.New("lock: held elsewhere")
	// ErrLost: the lock expired (or was taken over) before it could be extended or released.
	ErrLost = errors.New("lock: lost")
)

// Locker takes locks on one Redis.
type Locker struct {
	rs *redsync.Redsync
}

// New returns a Locker over rdb (a single node, Sentinel or Cluster client: each lock is
// one key).
func New(rdb redis.UniversalClient) *Locker {
	return &Locker{rs: redsync.New(goredis.NewPool(rdb))}
}

// Lock is a held lock.
type Lock struct {
	m   *redsync.Mutex
	ttl time.Duration

	mu      sync.Mutex
	stop    chan struct{}
	stopped chan struct{}
}

// TryLock takes the lock named key for ttl, once: it returns ErrHeld at once when someone
// else holds it, and a wrapped Redis error when Redis could not answer.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	if ttl < 10*time.Millisecond {
		return nil, fmt.Errorf("lock %s: ttl %s is under 10ms", key, ttl)
	}
	// redsync bounds each Redis call by ttl x timeout factor (default 5%: 50ms for a 1s
	// lock, which a loaded Redis misses). One node needs no quorum race: allow up to half
	// the TTL, at most 2s.
	factor := min(0.5, float64(2*time.Second)/float64(ttl))
	m := l.rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1), redsync.WithTimeoutFactor(factor))
	err := m.TryLockContext(ctx)
	if err == nil {
		return &Lock{m: m, ttl: ttl}, nil
	}
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) {
		return nil, fmt.Errorf("lock %s: %w", key, ErrHeld)
	}
	if errors.Is(err, redsync.ErrFailed) { // taken, but too slowly to leave a valid lease
		return nil, fmt.Errorf("lock %s: Redis answered too slowly for a %s lock", key, ttl)
	}
	return nil, fmt.Errorf("lock %s: %w", key, err)
}

// Extend resets the lock's TTL. It returns ErrLost when the lock is no longer ours.
func (lk *Lock) Extend(ctx context.Context) error {
	ok, err := lk.m.ExtendContext(ctx)
	if ok {
		return nil
	}
	return fmt.Errorf("extend %s: %w", lk.m.Name(), lostOr(err, redsync.ErrExtendFailed))
}

// lostOr maps redsync's ways of saying "not ours any more" (no error, the given sentinel,
// taken by another value) to ErrLost, and leaves Redis errors as they are.
func lostOr(err, sentinel error) error {
	var taken *redsync.ErrTaken
	var node *redsync.ErrNodeTaken
	if err == nil || errors.Is(err, sentinel) || errors.As(err, &taken) || errors.As(err, &node) {
		return ErrLost
	}
	return err
}

// KeepAlive extends the lock every third of its TTL until Release. onLost is called
// (once) if an extension finds the lock gone.
func (lk *Lock) KeepAlive(onLost func(error)) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.stop != nil {
		return
	}
	lk.stop, lk.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(lk.stopped)
		t := time.NewTicker(lk.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-lk.stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), lk.ttl/3)
			err := lk.Extend(ctx)
			cancel()
			if errors.Is(err, ErrLost) {
				if onLost != nil {
					onLost(err)
				}
				return
			}
		}
	}()
}

// Release stops any KeepAlive and deletes the lock if it is still ours. It returns
// ErrLost when it had already expired.
func (lk *Lock) Release(ctx context.Context) error {
	lk.mu.Lock()
	if lk.stop != nil {
		close(lk.stop)
		<-lk.stopped
		lk.stop = nil
	}
	lk.mu.Unlock()
	ok, err := lk.m.UnlockContext(ctx)
	if ok {
		return nil
	}
	return fmt.Errorf("release %s: %w", lk.m.Name(), lostOr(err, redsync.ErrLockAlreadyExpired))
}
