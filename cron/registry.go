package cron

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// The scheduler's entry in the registry of live processes (`jobs workers`,
// queue.Client.Processes), renewed every Config.Beat by one script call. The beats run on
// a goroutine of their own, not in Run's loop, whose reads of the entries may wait on an
// unreachable Redis: a process is listed again within one beat of Redis coming back,
// whatever the loop is doing. The reply carries the order an operator left (`jobs workers
// quiet|stop`), passed to Run's loop: a quiet scheduler fires nothing (the others fire
// every tick), a stopped one returns from Run.

// beatTimeout bounds one registry beat; Run waits for a beat in flight before it returns.
const beatTimeout = 2 * time.Second

// beats renews the registry entry every beat until stop is called, and sends each order
// it reads on the returned channel, once. stop waits for a beat in flight.
func (s *Scheduler) beats(ctx context.Context) (orders <-chan string, stop func()) {
	out := make(chan string, 2) // at most two orders: quiet, then stop
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		host, _ := os.Hostname()
		var started time.Time
		var quiet, stopped, failing bool
		t := time.NewTimer(0) // the first beat at once: listed within a round trip of Run
		defer t.Stop()
		for {
			select {
			case <-bctx.Done():
				return
			case <-t.C:
			}
			state := queue.ProcessRunning
			if quiet {
				state = queue.ProcessQuiet
			}
			p := &queue.Process{ID: s.cfg.ID, Kind: queue.KindScheduler, Host: host, PID: os.Getpid(),
				Version: proto.Version(), State: state, Busy: int(s.busy.Load()), StartedAt: started}
			// Not cancelled with Run: a beat sent just before a shutdown must land before
			// the deregister, or it would list the scheduler again for three beats.
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), min(s.cfg.Beat, beatTimeout))
			order, st, err := s.broker.Register(cctx, p, proto.BeatsToLive*s.cfg.Beat)
			ccancel()
			next := s.cfg.Beat
			switch {
			case err != nil:
				if !failing {
					s.log.LogAttrs(ctx, slog.LevelWarn, "cannot renew this scheduler's entry in the registry (jobs workers); retrying every beat",
						slog.String("error", err.Error()))
				}
				failing = true
			default:
				failing = false
				if started.IsZero() {
					started = st
				}
				if order == proto.OrderStop && !stopped {
					stopped = true
					out <- order
				}
				if order == proto.OrderQuiet && !quiet {
					quiet = true
					out <- order
					next = 0 // show the new state at once
				}
			}
			t.Reset(next)
		}
	}()
	return out, func() { cancel(); <-done }
}

// obey applies an order read by the beats to Run's loop state.
func (s *Scheduler) obey(ctx context.Context, order string, quiet, stop *bool) {
	switch order {
	case proto.OrderStop:
		s.log.LogAttrs(ctx, slog.LevelInfo, "stop ordered by an operator (jobs workers stop)")
		*stop = true
	case proto.OrderQuiet:
		s.log.LogAttrs(ctx, slog.LevelInfo, "quiet ordered by an operator (jobs workers quiet): firing no more ticks")
		*quiet = true
	}
}

// deregister removes the scheduler from the registry: gone at once rather than three
// beats later.
func (s *Scheduler) deregister(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), beatTimeout)
	defer cancel()
	if err := s.broker.Deregister(ctx, s.cfg.ID); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "cannot leave the registry (jobs workers); the entry expires three beats from now",
			slog.String("error", err.Error()))
	}
}
