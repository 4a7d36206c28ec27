package worker

import "time"

// callers runs the loop's Redis calls on goroutines kept for reuse. A goroutine started
// per call paid for its start and its stack's growth through go-redis on every call, on
// the path from a wake token to a handler's start; a kept one is handed the next call
// while it waits idle.
type callers struct {
	work   chan func()     // unbuffered: a send succeeds only when a caller waits idle
	exited <-chan struct{} // the loop's: idle callers end with it
}

// callerIdle is how long an idle caller waits for another call before it ends.
const callerIdle = 5 * time.Second

// spawn runs f on an idle caller, or on a new one when none is idle; it never blocks.
func (c *callers) spawn(f func()) {
	select {
	case c.work <- f:
	default:
		go c.serve(f)
	}
}

// serve runs f, then every call handed to it, until it has been idle for callerIdle or
// the loop has exited.
func (c *callers) serve(f func()) {
	idle := time.NewTimer(callerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(callerIdle)
		select {
		case f = <-c.work:
		case <-idle.C:
			return
		case <-c.exited:
			return
		}
	}
}
