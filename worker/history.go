package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

// The metrics history (queue's Client.History, `jobs stats --history`): the loop adds up
// each attempt's outcome, run time and wait time per queue, job type and minute, in
// memory, and flushes them every Config.HistoryInterval in one round trip, on a goroutine
// of its own, and once more when the worker stops. No Redis work per job. These are
// statistics, best effort: what a worker had not flushed when it died is lost.

// DefaultHistoryInterval is Config.HistoryInterval's default.
const DefaultHistoryInterval = 10 * time.Second

// historyPendingMax bounds the samples a worker keeps while its flushes fail (Redis
// unreachable): one per queue, job type and minute, so about 2 days of one type.
const historyPendingMax = 3000

type historyKey struct {
	queue, typ string
	minute     int64
}

// history is the loop's side of the metrics history.
type history struct {
	every    time.Duration // <= 0: off
	pending  map[historyKey]*proto.MetricsSample
	flushAt  time.Time // zero: nothing pending
	flushing bool
}

// observe records an attempt's outcome in the Prometheus metrics and the history.
func (l *loop) observe(r *run, outcome string, took time.Duration) {
	l.w.metrics.observe(r.job, outcome, took)
	l.observeHistory(r, outcome != outcomeSuccess, took)
}

// observeHistory adds the outcome of r, whose handler ran for took, to the history.
func (l *loop) observeHistory(r *run, failed bool, took time.Duration) {
	h := &l.hist
	if h.every <= 0 {
		return
	}
	// The minute by Redis's clock, which orders everything else in Redis too: the claim's
	// Redis time plus the time since the claim on this worker's clock (off by at most a
	// round trip), not this worker's clock, which may be skewed.
	end := r.job.StartedAt.Add(took)
	if !r.started.IsZero() && !r.claimed.IsZero() {
		end = end.Add(r.started.Sub(r.claimed))
	}
	k := historyKey{queue: r.q.name, typ: r.job.Type, minute: end.UnixMilli() / 60_000}
	s := h.pending[k]
	if s == nil {
		if len(h.pending) >= historyPendingMax {
			return
		}
		s = &proto.MetricsSample{Queue: k.queue, Type: k.typ, Minute: k.minute}
		h.pending[k] = s
	}
	s.Processed++
	if failed {
		s.Failed++
	}
	s.Run[proto.HistBucket(took)]++
	due := r.job.RunAt
	if due.IsZero() {
		due = r.job.CreatedAt
	}
	s.Wait[proto.HistBucket(max(r.job.StartedAt.Sub(due), 0))]++
	if h.flushAt.IsZero() {
		h.flushAt = time.Now().Add(h.every)
	}
}

// historyStep flushes the history when its time has come, or at once when the worker is
// stopping and has settled every run.
func (l *loop) historyStep(now time.Time) {
	h := &l.hist
	if len(h.pending) == 0 || h.flushing {
		return
	}
	final := l.stopping && len(l.runs) == 0
	if !final && now.Before(h.flushAt) {
		return
	}
	samples := make([]*proto.MetricsSample, 0, len(h.pending))
	for _, s := range h.pending {
		samples = append(samples, s)
	}
	h.pending, h.flushAt, h.flushing = map[historyKey]*proto.MetricsSample{}, time.Time{}, true
	l.calls++
	go func() {
		ctx, cancel := context.WithTimeout(l.bg, reportTimeout)
		retry, err := l.w.broker.RecordMetrics(ctx, samples)
		cancel()
		l.postEvent(func() { l.flushed(retry, err, final) })
	}()
}

// flushed takes a flush's outcome: samples that certainly were not recorded are kept for
// the next flush, unless the worker is stopping (Run must not wait for Redis to come
// back for statistics).
func (l *loop) flushed(retry []*proto.MetricsSample, err error, final bool) {
	h := &l.hist
	l.calls--
	h.flushing = false
	if err == nil {
		return
	}
	keep := !final && !l.stopping
	l.log.LogAttrs(context.Background(), slog.LevelWarn, "cannot record the metrics history",
		slog.String("error", err.Error()), slog.Bool("retrying", keep && len(retry) > 0))
	if !keep {
		return
	}
	for _, s := range retry {
		k := historyKey{queue: s.Queue, typ: s.Type, minute: s.Minute}
		if p := h.pending[k]; p != nil {
			p.Add(s)
		} else if len(h.pending) < historyPendingMax {
			h.pending[k] = s
		}
	}
	if len(h.pending) > 0 && h.flushAt.IsZero() {
		h.flushAt = time.Now().Add(h.every)
	}
}
