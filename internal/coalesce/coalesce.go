// Package coalesce merges concurrent calls into batches, so many goroutines that each
// enqueue or acknowledge one job share one Redis round trip and one script call.
//
// It batches opportunistically, with no timer: the first call flushes at once; calls that
// arrive while a flush is out wait and leave together in the next one. A lone call
// therefore pays no added latency, and batches grow only with concurrency.
package coalesce

import (
	"context"
	"sync"
)

// Batcher coalesces calls of In into batches handled by one function.
type Batcher[In, Out any] struct {
	max int
	do  func(batch []In) []Out

	mu      sync.Mutex
	pending []*call[In, Out]
	busy    bool
}

type call[In, Out any] struct {
	in   In
	out  Out
	done chan struct{}
}

// New returns a Batcher that hands batches of at most max inputs to do, which must
// return one output per input, in order. do runs on one goroutine at a time.
func New[In, Out any](max int, do func(batch []In) []Out) *Batcher[In, Out] {
	return &Batcher[In, Out]{max: max, do: do}
}

// Do submits v and waits for its output. A call waiting for another's flush returns
// ctx's error and the zero Out when ctx ends first; v may still be processed (as with any
// request whose reply was not awaited). A call running the flush returns with it: do
// must bound its own time.
//
// A call that finds no flush running runs one itself, inline, so an uncontended call
// costs no goroutine switch; if more calls arrived meanwhile, it hands them to a new
// goroutine and returns.
func (b *Batcher[In, Out]) Do(ctx context.Context, v In) (Out, error) {
	c := &call[In, Out]{in: v, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	if b.busy {
		b.mu.Unlock()
		select {
		case <-c.done:
			return c.out, nil
		case <-ctx.Done():
			var zero Out
			return zero, ctx.Err()
		}
	}
	b.busy = true
	b.mu.Unlock()
	b.flushOnce() // nothing was pending before c, so c is in this batch
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.busy = false
		b.mu.Unlock()
	} else {
		b.mu.Unlock()
		go b.flush()
	}
	return c.out, nil
}

// flush sends batches until nothing is pending, then marks the Batcher idle.
func (b *Batcher[In, Out]) flush() {
	for b.flushOnce() {
	}
}

// flushOnce sends one batch of up to max pending calls. It reports false, having marked
// the Batcher idle, when nothing was pending.
func (b *Batcher[In, Out]) flushOnce() bool {
	b.mu.Lock()
	n := min(len(b.pending), b.max)
	if n == 0 {
		b.busy = false
		b.mu.Unlock()
		return false
	}
	batch := make([]*call[In, Out], n)
	copy(batch, b.pending)
	b.pending = append(b.pending[:0], b.pending[n:]...)
	b.mu.Unlock()

	ins := make([]In, n)
	for i, c := range batch {
		ins[i] = c.in
	}
	outs := b.do(ins)
	for i, c := range batch {
		c.out = outs[i]
		close(c.done)
	}
	return true
}
