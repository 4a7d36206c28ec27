// Package cron fires cron entries: each tick of each entry enqueues exactly one job, however
// many schedulers run. Every scheduler computes the same ticks; at a tick they race for a
// redsync lock on (entry, tick) with TryLock, and the winner enqueues the job under an ID
// derived from (entry, tick), so even a lock that expired early cannot produce a second
// job (the enqueue is then a queue.ErrDuplicate). A killed scheduler costs no tick while
// another runs.
//
// Entries come from Go (Config.Entries) and from Redis (Store), where `jobs cron add` puts
// them; running schedulers pick up changes within Config.PollInterval. An entry is checked
// when added (Store.Add, New) as Enqueue would check its job, and a spec that never fires
// (February 30) is refused; one found in Redis anyway is skipped and logged. Each tick is
// fired on its own goroutine, so an entry whose enqueue fails never delays another's.
//
// Time zones: a spec is in UTC unless prefixed CRON_TZ=Area/City, so that schedulers on
// hosts set to different zones compute the same ticks. Daylight saving (CRON_TZ): as in
// system cron (vixie, cronie), an entry at fixed times fires each wall time once. A time
// the clocks skip in spring (02:30 when they jump from 02:00 to 03:00) fires right after
// the jump, once; a time they show twice in autumn fires at its first occurrence only. An
// entry whose second, minute or hour field is a wildcard (`*`, `*/n`; @hourly) follows
// real time instead: it fires in both passes of a repeated hour and not in a skipped one.
// @every counts real time.
package cron

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/ident"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/lock"
	"github.com/jobs-dev/jobs/queue"
)

// Defaults for Config's zero fields.
const (
	DefaultPollInterval = 500 * time.Millisecond
	DefaultLockTTL      = time.Minute
	DefaultBeat         = proto.DefaultBeat
	// fullReload is how often the dynamic entries are re-read even when the version key
	// did not change (someone edited the hash by hand).
	fullReload = 30 * time.Second
)

// Config configures a Scheduler. Zero fields mean their documented defaults.
type Config struct {
	// Entries are static entries, fired alongside the dynamic ones in Redis. A dynamic
	// entry with the same name as a static one is ignored.
	Entries []Entry
	// PollInterval is how often the scheduler checks Redis for changed entries.
	// Default: 500ms.
	PollInterval time.Duration
	// LockTTL is how long the lock on one (entry, tick) lives. It is never released: a
	// scheduler that comes late to a tick must find it taken. Default: 1m.
	LockTTL time.Duration
	// Logger receives the scheduler's logs. Default: slog.Default().
	Logger *slog.Logger
	// ID names this scheduler in logs and in the registry of live processes; two live
	// schedulers must not share one. Default: host:pid:random.
	ID string
	// Beat is how often the scheduler renews its entry in the registry of live processes
	// (`jobs workers`): one script call per beat. The entry expires three beats after the
	// last renewal; an operator's quiet or stop is obeyed within one beat. At least 100ms.
	// Default: 5s.
	Beat time.Duration
	// Registerer receives jobs_cron_fired_total{entry} (ticks this scheduler enqueued) and
	// jobs_cron_skipped_total{entry,reason} (reason "held": another scheduler fired the
	// tick; "duplicate": its job already existed). Default: nil, no metrics.
	Registerer prometheus.Registerer
}

// Scheduler fires cron entries; see the package doc.
type Scheduler struct {
	client *queue.Client
	broker broker.Broker // client's worker side: the registry beat
	store  *Store
	locker *lock.Locker
	cfg    Config
	log    *slog.Logger
	static map[string]Entry

	// firing counts the fire calls under way: each runs on its own goroutine, so that an
	// entry whose enqueue fails or hangs never delays another entry's tick.
	firing sync.WaitGroup
	busy   atomic.Int64 // fire calls under way, shown in the registry

	fired, skipped *prometheus.CounterVec // nil without Config.Registerer
}

// New returns a Scheduler; it does nothing until Run. It fails on an invalid static entry
// or two static entries with one name, with an error wrapping ErrInvalid.
func New(client *queue.Client, cfg Config) (*Scheduler, error) {
	if client == nil {
		return nil, errors.New("cron: nil queue client")
	}
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultPollInterval)
	cfg.LockTTL = cmp.Or(cfg.LockTTL, DefaultLockTTL)
	cfg.Beat = cmp.Or(cfg.Beat, DefaultBeat)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ID == "" {
		cfg.ID = ident.New()
	}
	if cfg.PollInterval < 0 || cfg.LockTTL < time.Second {
		return nil, fmt.Errorf("cron: Config.PollInterval must be positive and LockTTL at least 1s")
	}
	if cfg.Beat < 100*time.Millisecond {
		return nil, fmt.Errorf("cron: Config.Beat %s is under 100ms", cfg.Beat)
	}
	s := &Scheduler{client: client, broker: broker.Of(client), store: NewStore(client), locker: lock.New(broker.Of(client).Redis()),
		cfg: cfg, log: cfg.Logger.With(slog.String("scheduler_id", cfg.ID)), static: map[string]Entry{}}
	if reg := cfg.Registerer; reg != nil {
		s.fired = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobs_cron_fired_total", Help: "Cron ticks this scheduler enqueued, by entry.",
		}, []string{"entry"})
		s.skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobs_cron_skipped_total", Help: "Cron ticks this scheduler did not enqueue, by entry and reason: held or duplicate (another scheduler fired it), running (an exclusive entry's last job is still pending or running).",
		}, []string{"entry", "reason"})
		for _, c := range []prometheus.Collector{s.fired, s.skipped} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("cron: register metrics: %w", err)
			}
		}
	}
	for _, e := range cfg.Entries {
		if err := e.check(client); err != nil {
			return nil, err
		}
		if _, dup := s.static[e.Name]; dup {
			return nil, fmt.Errorf("%w: two entries named %q", ErrInvalid, e.Name)
		}
		s.static[e.Name] = e
	}
	return s, nil
}

// planned is an entry with its schedule and next tick (zero: it never fires again).
type planned struct {
	entry Entry
	sched schedule
	next  time.Time
}

// Run fires entries until ctx is cancelled or an operator stops the scheduler
// (queue.Client.Stop, `jobs workers stop`), then returns nil. Redis errors are logged and
// retried; they never stop it. While it runs, the scheduler is listed in the registry of
// live processes (see Config.Beat); it leaves the list when Run returns.
func (s *Scheduler) Run(ctx context.Context) error {
	s.log.LogAttrs(ctx, slog.LevelInfo, "scheduler started", slog.Int("static_entries", len(s.static)))
	plan := map[string]*planned{}
	version := int64(-1)
	var nextPoll, lastFull time.Time
	first := true
	orders, stopBeats := s.beats(ctx)
	var quiet, stop bool // an operator's orders, read by the beats
	for ctx.Err() == nil && !stop {
		now := time.Now()
		if !now.Before(nextPoll) {
			nextPoll = now.Add(s.cfg.PollInterval)
			v, err := s.store.Version(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.LogAttrs(ctx, slog.LevelWarn, "cannot read cron entries", slog.String("error", err.Error()))
				}
			} else if v != version || now.Sub(lastFull) > fullReload {
				if s.reload(ctx, plan, now, first) {
					version, lastFull, first = v, now, false
				}
			}
		}
		for _, p := range plan {
			// A zero next tick means none: it must never count as due, or the loop
			// would fire it (dated year 1) and spin.
			if !p.next.IsZero() && !p.next.After(now) {
				if !quiet {
					s.start(ctx, p, p.next)
				}
				// Ticks missed while the loop was held up (process paused) are skipped.
				p.next = p.sched.Next(time.Now())
			}
		}
		wake := nextPoll
		for _, p := range plan {
			if !p.next.IsZero() && p.next.Before(wake) {
				wake = p.next
			}
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
		case <-t.C:
		case order := <-orders:
			s.obey(ctx, order, &quiet, &stop)
		}
		t.Stop()
	}
	s.firing.Wait()
	stopBeats()
	s.deregister(ctx)
	s.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "scheduler stopped")
	return nil
}

// reload merges the static entries with the dynamic ones from Redis into plan, keeping
// the next tick of unchanged entries. On the first load it fires the latest missed tick
// of catch-up entries. It reports whether the dynamic entries could be read.
func (s *Scheduler) reload(ctx context.Context, plan map[string]*planned, now time.Time, first bool) bool {
	dynamic, err := s.store.List(ctx)
	if err != nil && dynamic == nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "cannot read cron entries", slog.String("error", err.Error()))
		return false
	}
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "skipping broken cron entries", slog.String("error", err.Error()))
	}
	want := map[string]Entry{}
	for _, e := range dynamic {
		if _, clash := s.static[e.Name]; clash {
			s.log.LogAttrs(ctx, slog.LevelWarn, "dynamic cron entry ignored: a static entry has its name",
				slog.String("entry", e.Name))
			continue
		}
		want[e.Name] = e
	}
	for name, e := range s.static {
		want[name] = e
	}
	for name := range plan {
		if _, ok := want[name]; !ok {
			delete(plan, name)
			s.log.LogAttrs(ctx, slog.LevelInfo, "cron entry removed", slog.String("entry", name))
		}
	}
	var states map[string]State
	for name, e := range want {
		old, ok := plan[name]
		if ok && reflect.DeepEqual(old.entry, e) {
			continue
		}
		sched, err := parseSchedule(e.Spec)
		if err != nil { // validated on load; cannot happen
			continue
		}
		// An edited entry keeps a tick that fell due but has not fired yet (the edit
		// arrived in the same moment): its next tick is the new schedule's first at or
		// after the old next tick, not after now.
		from := now
		if ok && !old.next.After(now) {
			from = old.next.Add(-time.Nanosecond)
		}
		p := &planned{entry: e, sched: sched, next: sched.Next(from)}
		plan[name] = p
		if p.next.IsZero() { // parseSchedule refuses such specs: only a clock far off could get here
			s.log.LogAttrs(ctx, slog.LevelError, "cron entry never fires: skipped", slog.String("entry", name),
				slog.String("spec", e.Spec))
			continue
		}
		s.log.LogAttrs(ctx, slog.LevelInfo, "cron entry loaded", slog.String("entry", name),
			slog.String("spec", e.Spec), slog.Time("next_tick", p.next))
		if first && e.CatchUp {
			if states == nil {
				states, _ = s.store.States(ctx)
			}
			if tick := lastMissed(sched, states[name].LastTick, now); !tick.IsZero() {
				s.log.LogAttrs(ctx, slog.LevelInfo, "catching up a missed tick",
					slog.String("entry", name), slog.Time("tick", tick))
				s.start(ctx, p, tick)
			}
		}
	}
	return true
}

// lastMissed returns the latest tick after last and not after now, or zero when there is
// none (or the entry never fired: nothing was missed).
func lastMissed(sched schedule, last, now time.Time) time.Time {
	if last.IsZero() {
		return time.Time{}
	}
	if a, ok := sched.(aligned); ok {
		if t := now.Truncate(a.d); t.After(last) {
			return t
		}
		return time.Time{}
	}
	// Walk the ticks from last; after a long outage of a frequent entry that could take
	// millions of steps, so past a bound walk only the last day (or week) instead.
	for _, from := range []time.Time{last, now.Add(-24 * time.Hour), now.Add(-7 * 24 * time.Hour)} {
		if from.Before(last) {
			from = last
		}
		var missed time.Time
		n := 0
		for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
			missed = t
			if n++; n > 200_000 {
				break
			}
		}
		if n <= 200_000 {
			return missed
		}
	}
	return time.Time{}
}

// start fires p's tick on a goroutine of its own (see Scheduler.firing). The entry and
// schedule are passed by value: the loop goes on to update p.
func (s *Scheduler) start(ctx context.Context, p *planned, tick time.Time) {
	e, sched := p.entry, p.sched
	s.busy.Add(1)
	s.firing.Go(func() {
		defer s.busy.Add(-1)
		s.fire(ctx, e, sched, tick)
	})
}

// fire enqueues e's job for tick unless another scheduler already did.
func (s *Scheduler) fire(ctx context.Context, e Entry, sched schedule, tick time.Time) {
	log := s.log.With(slog.String("entry", e.Name), slog.Time("tick", tick))
	_, err := s.locker.TryLock(ctx, proto.CronTickLock(s.client.Config().Prefix, e.Name, tick), s.cfg.LockTTL)
	if errors.Is(err, lock.ErrHeld) {
		log.LogAttrs(ctx, slog.LevelDebug, "tick fired by another scheduler")
		s.count(s.skipped, e.Name, "held")
		return
	}
	if err != nil {
		// Without the lock we still try: the job ID makes a second enqueue a duplicate.
		log.LogAttrs(ctx, slog.LevelWarn, "cron lock failed; enqueuing anyway (the job ID dedups)",
			slog.String("error", err.Error()))
	}
	opts, err := e.options(tick)
	if err != nil {
		log.LogAttrs(ctx, slog.LevelError, "invalid cron entry", slog.String("error", err.Error()))
		return
	}
	// The tick's lock is ours for LockTTL and no other scheduler will fire it: retry a
	// failed enqueue (the job ID makes a retry that follows a lost reply a duplicate),
	// but not a refused job, which a retry cannot change.
	var id string
	for try := range 4 {
		if try > 0 {
			select {
			case <-time.After(time.Duration(try*try) * 100 * time.Millisecond):
			case <-ctx.Done():
			}
		}
		id, err = s.client.Enqueue(ctx, e.Type, []byte(e.Payload), opts...)
		if err == nil || errors.Is(err, queue.ErrDuplicate) || errors.Is(err, queue.ErrInvalid) ||
			errors.Is(err, queue.ErrPayloadTooLarge) || ctx.Err() != nil {
			break
		}
	}
	switch {
	case errors.Is(err, queue.ErrDuplicate) && e.Exclusive && id != "" && id != JobID(e.Name, tick):
		log.LogAttrs(ctx, slog.LevelInfo, "tick skipped: the entry's last job is still pending or running",
			slog.String("job_id", id))
		s.count(s.skipped, e.Name, "running")
		return
	case errors.Is(err, queue.ErrDuplicate):
		log.LogAttrs(ctx, slog.LevelDebug, "tick already enqueued")
		s.count(s.skipped, e.Name, "duplicate")
		return
	case err != nil:
		log.LogAttrs(ctx, slog.LevelError, "cron tick lost: cannot enqueue", slog.String("error", err.Error()))
		return
	}
	s.count(s.fired, e.Name)
	log.LogAttrs(ctx, slog.LevelDebug, "cron fired", slog.String("job_id", id),
		slog.Duration("late", time.Since(tick)))
	st := State{LastTick: tick, LastJob: id, NextTick: sched.Next(time.Now())}
	if err := s.store.record(ctx, e.Name, st); err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "cannot record cron state", slog.String("error", err.Error()))
	}
}

func (s *Scheduler) count(v *prometheus.CounterVec, labels ...string) {
	if v != nil {
		v.WithLabelValues(labels...).Inc()
	}
}
