package worker

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// The worker's entry in the registry of live processes (`jobs workers`,
// queue.Client.Processes). The loop beats it every Config.Beat as one more Redis call on
// a goroutine of its own (one script call: a worker costs Redis one call per beat, 0.2
// a second by default), so a slow Redis never holds the loop. The reply carries the order
// an operator left (`jobs workers quiet|stop`), obeyed at once: no polling beyond the
// beat. The entry lives three beats, so a killed worker leaves the list by itself; Run
// removes it when it returns.

// registration is the loop's state of its registry entry.
type registration struct {
	next      time.Time // the next beat
	beating   bool      // a beat is in flight
	failing   bool      // the last beat failed (logged once per outage)
	startedAt time.Time // the entry's start, Redis's clock, from the first beat's reply
}

// beatTimeout bounds one registry beat; Run waits for a beat in flight before it returns.
const beatTimeout = 2 * time.Second

// beatRegistry sends the registry beat when it is due.
func (l *loop) beatRegistry(now time.Time) {
	if l.reg.beating || now.Before(l.reg.next) {
		return
	}
	if l.stopping && len(l.runs) == 0 && l.calls == 0 {
		return // the loop ends now, and Run removes the entry
	}
	l.reg.beating = true
	l.reg.next = now.Add(l.cfg.Beat)
	l.calls++
	p := l.w.process(l.processState(), l.busy, l.reg.startedAt)
	go func() {
		ctx, cancel := context.WithTimeout(l.bg, min(l.cfg.Beat, beatTimeout))
		order, started, err := l.w.broker.Register(ctx, p, proto.BeatsToLive*l.cfg.Beat)
		cancel()
		l.postEvent(func() { l.registered(order, started, err) })
	}()
}

// registered takes a registry beat's reply and obeys the order in it.
func (l *loop) registered(order string, started time.Time, err error) {
	now := time.Now()
	l.reg.beating = false
	l.calls--
	if err != nil {
		if !l.reg.failing {
			l.log.LogAttrs(context.Background(), slog.LevelWarn,
				"cannot renew this worker's entry in the registry (jobs workers); retrying every beat",
				slog.String("error", err.Error()))
		}
		l.reg.failing = true
		return
	}
	l.reg.failing = false
	if l.reg.startedAt.IsZero() {
		l.reg.startedAt = started
	}
	switch {
	case order == proto.OrderStop && !l.stopping:
		l.log.LogAttrs(context.Background(), slog.LevelInfo, "stop ordered by an operator (jobs workers stop)")
		l.beginStop(now)
	case order == proto.OrderQuiet && !l.quiet && !l.stopping:
		l.log.LogAttrs(context.Background(), slog.LevelInfo,
			"quiet ordered by an operator (jobs workers quiet): claiming no more jobs, finishing the running ones",
			slog.Int("running", l.busy))
		l.goQuiet()
	}
}

// goQuiet stops claiming: claims find no room, waits end, and the jobs claimed ahead go
// back to the head of their queue. Running jobs run on, their leases renewed.
func (l *loop) goQuiet() {
	l.quiet = true
	l.reg.next = time.Time{} // show the new state at once
	if len(l.buffer) > 0 {
		back := l.buffer
		l.buffer = nil
		l.handBack(back)
	}
}

func (l *loop) processState() queue.ProcessState {
	switch {
	case l.stopping:
		return queue.ProcessStopping
	case l.quiet:
		return queue.ProcessQuiet
	}
	return queue.ProcessRunning
}

// process is w's registry entry at a beat.
func (w *Worker) process(state queue.ProcessState, busy int, started time.Time) *queue.Process {
	p := w.entry // a copy; its Queues map is never changed after New
	p.State, p.Busy, p.StartedAt = state, busy, started
	if m, ok := w.cfg.Handler.(*Mux); ok {
		// Read at each beat: handlers may be added to a Mux after New.
		p.Types = slices.Sorted(slices.Values(m.Types()))
	}
	return &p
}

// newEntry is what the registry says of a worker apart from its state.
func newEntry(cfg Config) queue.Process {
	host, _ := os.Hostname()
	return queue.Process{ID: cfg.ID, Kind: queue.KindWorker, Host: host, PID: os.Getpid(),
		Version: proto.Version(), Queues: maps.Clone(cfg.Queues), Concurrency: cfg.Concurrency}
}

// deregister removes the worker from the registry when Run returns: gone at once rather
// than three beats later.
func (w *Worker) deregister(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), beatTimeout)
	defer cancel()
	if err := w.broker.Deregister(ctx, w.cfg.ID); err != nil {
		w.log.LogAttrs(ctx, slog.LevelWarn, "cannot leave the registry (jobs workers); the entry expires three beats from now",
			slog.String("error", err.Error()))
	}
}
