package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // the dead-Redis test would log every dial failure
	redistest.Main(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var ctx = context.Background()

func TestTryLockIsExclusive(t *testing.T) {
	t.Parallel()
	l := New(redistest.Client(t))
	key := redistest.Prefix(t) + ":lock"
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.TryLock(ctx, key, time.Second)
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, ErrHeld):
				t.Errorf("TryLock() err = %v, want nil or ErrHeld", err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d goroutines took the lock, want 1", won.Load())
	}
}

func TestReleaseLetsOthersIn(t *testing.T) {
	t.Parallel()
	l := New(redistest.Client(t))
	key := redistest.Prefix(t) + ":lock"
	lk, err := l.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release() err = %v", err)
	}
	if _, err := l.TryLock(ctx, key, time.Minute); err != nil {
		t.Fatalf("TryLock() after release err = %v", err)
	}
	if err := lk.Release(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("Release() of a lock now held by another err = %v, want ErrLost", err)
	}
}

func TestKeepAliveOutlivesTTL(t *testing.T) {
	t.Parallel()
	l := New(redistest.Client(t))
	key := redistest.Prefix(t) + ":lock"
	// TTLs well above a loaded Redis's round trip under -race: each call may take ttl/2.
	lk, err := l.TryLock(ctx, key, 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	lk.KeepAlive(func(err error) { t.Errorf("lost: %v", err) })
	time.Sleep(1500 * time.Millisecond)
	if _, err := l.TryLock(ctx, key, time.Second); !errors.Is(err, ErrHeld) {
		t.Fatalf("TryLock() while kept alive err = %v, want ErrHeld", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release() err = %v", err)
	}
}

func TestExpiredLockIsLost(t *testing.T) {
	t.Parallel()
	l := New(redistest.Client(t))
	key := redistest.Prefix(t) + ":lock"
	lk, err := l.TryLock(ctx, key, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if err := lk.Extend(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("Extend() after expiry err = %v, want ErrLost", err)
	}
}

func TestRedisDownIsNotHeld(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr
	srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	_, err = New(rdb).TryLock(ctx, "k", time.Second)
	if err == nil || errors.Is(err, ErrHeld) {
		t.Errorf("TryLock() on a dead Redis err = %v, want a Redis error, not ErrHeld", err)
	}
}
