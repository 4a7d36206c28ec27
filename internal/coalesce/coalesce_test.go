package coalesce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConcurrentCallsShareBatches(t *testing.T) {
	var calls, biggest atomic.Int64
	b := New(50, func(_ context.Context, batch []int) []int {
		calls.Add(1)
		if n := int64(len(batch)); n > biggest.Load() {
			biggest.Store(n)
		}
		time.Sleep(time.Millisecond) // a round trip
		out := make([]int, len(batch))
		for i, v := range batch {
			out[i] = v * 2
		}
		return out
	})
	var wg sync.WaitGroup
	for g := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				v := g*1000 + i
				got, err := b.Do(context.Background(), v)
				if err != nil || got != 2*v {
					t.Errorf("Do(%d) = %d, %v", v, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if calls.Load() >= 2000 || biggest.Load() > 50 || biggest.Load() < 2 {
		t.Errorf("%d batches for 2000 calls, biggest %d: want fewer batches, none over 50", calls.Load(), biggest.Load())
	}
}

func TestLoneCallGoesAtOnce(t *testing.T) {
	b := New(10, func(_ context.Context, batch []string) []string { return batch })
	for range 3 {
		if got, err := b.Do(context.Background(), "x"); err != nil || got != "x" {
			t.Fatalf("Do() = %q, %v", got, err)
		}
	}
}

func TestWaitingCallReturnsWhenContextEnds(t *testing.T) {
	release := make(chan struct{})
	b := New(10, func(_ context.Context, batch []int) []int { <-release; return batch })
	go b.Do(context.Background(), 1) // runs the flush, blocked in do
	time.Sleep(10 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Do(ctx, 2); err == nil {
		t.Fatal("a waiting Do() returned no error after its context ended")
	}
	close(release)
}

// The flusher goroutine exits once idle, and the next call that needs one starts another.
func TestIdleFlusherExitsAndComesBack(t *testing.T) {
	b := New(10, func(_ context.Context, batch []int) []int { return batch })
	b.idle = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background()) // not inline: through the flusher
	defer cancel()
	running := func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.flusher
	}
	for round := range 3 {
		if got, err := b.Do(ctx, round); err != nil || got != round {
			t.Fatalf("round %d: Do() = %d, %v", round, got, err)
		}
		if !running() {
			t.Fatalf("round %d: no flusher right after a call", round)
		}
		deadline := time.Now().Add(5 * time.Second)
		for running() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the flusher still runs 5s after its last call", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// While one batch is in flight, calls that arrive meanwhile leave in a second one, never a
// third; every call gets its own answer.
func TestSecondBatchLeavesWhileFirstIsOut(t *testing.T) {
	var now, most atomic.Int64
	b := New(100, func(_ context.Context, batch []int) []int {
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond) // a round trip
		now.Add(-1)
		out := make([]int, len(batch))
		for i, v := range batch {
			out[i] = v + 1
		}
		return out
	})
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				v := g*100 + i
				if got, err := b.Do(context.Background(), v); err != nil || got != v+1 {
					t.Errorf("Do(%d) = %d, %v", v, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d batches in flight at once, want 2", m)
	}
}

// With Interrupt, a lone call whose context can end runs on the caller's goroutine (no
// flusher is started) and returns what do returned when cut short at ctx's end.
func TestInterruptibleCallRunsInline(t *testing.T) {
	var armed, released atomic.Int64
	b := New(10, func(ctx context.Context, batch []int) []int {
		if batch[0] < 0 { // a call that blocks until its context ends, as a cut read would
			<-ctx.Done()
			return []int{-100}
		}
		return batch
	})
	b.Interrupt = func(_ context.Context, v int) (func(), bool) {
		armed.Add(1)
		return func() { released.Add(1) }, true
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if got, err := b.Do(ctx, 7); err != nil || got != 7 {
		t.Fatalf("Do() = %d, %v; want 7, nil", got, err)
	}
	b.mu.Lock()
	flusher := b.flusher
	b.mu.Unlock()
	if flusher {
		t.Error("a lone interruptible call started the flusher goroutine; want it inline")
	}
	cctx, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if got, err := b.Do(cctx, -1); err != nil || got != -100 {
		t.Errorf("Do() cut short = %d, %v; want do's output -100, nil", got, err)
	}
	if armed.Load() != 2 || released.Load() != 2 {
		t.Errorf("Interrupt armed %d calls, released %d; want 2 and 2", armed.Load(), released.Load())
	}
}

// An Interrupt that cannot arm a call leaves it to the flusher, which still returns at
// ctx's end while do is blocked.
func TestUninterruptibleCallWaitsForFlusher(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	b := New(10, func(_ context.Context, batch []int) []int { <-release; return batch })
	b.Interrupt = func(context.Context, int) (func(), bool) { return nil, false }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := b.Do(ctx, 1); !errors.Is(err, ErrInFlight) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Do() with do blocked = %v; want ErrInFlight and the deadline", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Do() returned %v after its deadline of 20ms", took)
	}
}
