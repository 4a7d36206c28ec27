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
// queue.Client.Processes), renewed every Config.Beat by one script call on a goroutine of
// its own that reports back to Run's loop, so a slow Redis never delays a tick. The reply
// carries the order an operator left (`jobs workers quiet|stop`): a quiet scheduler fires
// nothing (the others fire every tick), a stopped one returns from Run.

// beatTimeout bounds one registry beat; Run waits for a beat in flight before it returns.
const beatTimeout = 2 * time.Second

// beatReply is the outcome of one registry beat.
type beatReply struct {
	order   string
	started time.Time
	err     error
}

// registration is Run's state of its registry entry.
type registration struct {
	next      time.Time // the next beat
	beating   bool      // a beat is in flight; its reply comes on replies
	failing   bool      // the last beat failed (logged once per outage)
	startedAt time.Time // the entry's start, Redis's clock, from the first beat's reply
	quiet     bool      // an operator's quiet: fire nothing
	stop      bool      // an operator's stop: Run returns
	replies   chan beatReply
}

// beat sends the registry beat when it is due.
func (s *Scheduler) beat(ctx context.Context, r *registration, now time.Time) {
	if r.beating || now.Before(r.next) {
		return
	}
	r.beating, r.next = true, now.Add(s.cfg.Beat)
	state := queue.ProcessRunning
	if r.quiet {
		state = queue.ProcessQuiet
	}
	host, _ := os.Hostname()
	p := &queue.Process{ID: s.cfg.ID, Kind: queue.KindScheduler, Host: host, PID: os.Getpid(),
		Version: proto.Version(), State: state, Busy: int(s.busy.Load()), StartedAt: r.startedAt}
	go func() {
		// Not Run's ctx: a beat sent just before a shutdown must land before the
		// deregister, or it would list the scheduler again for three beats.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(s.cfg.Beat, beatTimeout))
		order, started, err := s.broker.Register(bctx, p, proto.BeatsToLive*s.cfg.Beat)
		cancel()
		r.replies <- beatReply{order, started, err} // buffered 1: one beat in flight
	}()
}

// registered takes a beat's reply and obeys the order in it.
func (s *Scheduler) registered(ctx context.Context, r *registration, rep beatReply) {
	r.beating = false
	if rep.err != nil {
		if !r.failing {
			s.log.LogAttrs(ctx, slog.LevelWarn, "cannot renew this scheduler's entry in the registry (jobs workers); retrying every beat",
				slog.String("error", rep.err.Error()))
		}
		r.failing = true
		return
	}
	r.failing = false
	if r.startedAt.IsZero() {
		r.startedAt = rep.started
	}
	switch {
	case rep.order == proto.OrderStop:
		s.log.LogAttrs(ctx, slog.LevelInfo, "stop ordered by an operator (jobs workers stop)")
		r.stop = true
	case rep.order == proto.OrderQuiet && !r.quiet:
		s.log.LogAttrs(ctx, slog.LevelInfo, "quiet ordered by an operator (jobs workers quiet): firing no more ticks")
		r.quiet = true
		r.next = time.Time{} // show the new state at once
	}
}

// deregister waits for a beat in flight, then removes the scheduler from the registry:
// gone at once rather than three beats later.
func (s *Scheduler) deregister(ctx context.Context, r *registration) {
	if r.beating {
		<-r.replies // the beat's own timeout bounds the wait
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), beatTimeout)
	defer cancel()
	if err := s.broker.Deregister(ctx, s.cfg.ID); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "cannot leave the registry (jobs workers); the entry expires three beats from now",
			slog.String("error", err.Error()))
	}
}
