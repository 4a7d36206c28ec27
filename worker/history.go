package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

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

// historyStep flushes the history when its time has come (the last flush, when the
// worker stops, is flushHistoryAtExit's).
func (l *loop) historyStep(now time.Time) {
	h := &l.hist
	if len(h.pending) == 0 || h.flushing || now.Before(h.flushAt) {
		return
	}
	samples := h.take()
	h.flushing = true
	l.calls++
	go func() {
		ctx, cancel := context.WithTimeout(l.bg, reportTimeout)
		retry, err := l.w.broker.RecordMetrics(ctx, samples)
		cancel()
		l.postEvent(func() { l.flushed(retry, err) })
	}()
}

// take returns the pending samples and forgets them.
func (h *history) take() []*proto.MetricsSample {
	samples := make([]*proto.MetricsSample, 0, len(h.pending))
	for _, s := range h.pending {
		samples = append(samples, s)
	}
	h.pending, h.flushAt = map[historyKey]*proto.MetricsSample{}, time.Time{}
	return samples
}

// historyExitTimeout bounds the last flush: statistics must not hold a shutdown.
const historyExitTimeout = 2 * time.Second

// flushHistoryAtExit sends what is pending once the loop has ended (every run settled,
// every call answered), so Run returns with the worker's history recorded. It runs after
// the loop rather than in it, so a stopping loop ends as soon as its jobs are settled.
func (l *loop) flushHistoryAtExit(ctx context.Context) {
	if len(l.hist.pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyExitTimeout)
	defer cancel()
	_, err := l.w.broker.RecordMetrics(ctx, l.hist.take())
	l.historyError(err, false)
}

// flushed takes a periodic flush's outcome: samples that certainly were not recorded are
// kept for the next flush (or the last, when the worker stops).
func (l *loop) flushed(retry []*proto.MetricsSample, err error) {
	h := &l.hist
	l.calls--
	h.flushing = false
	if !l.historyError(err, len(retry) > 0) {
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

// historyError logs a flush's error and reports whether its samples are worth another try.
func (l *loop) historyError(err error, retrying bool) bool {
	if err == nil {
		return false
	}
	if redis.IsOOMError(err) {
		// A full Redis (maxmemory, noeviction) refuses the history's writes, which only
		// add: dropped, not retried, and not a warning, since the worker's own calls
		// still go through (they remove first) and enqueues already report it loudly.
		l.log.LogAttrs(context.Background(), slog.LevelInfo, "metrics history dropped: Redis is out of memory; jobs still run")
		return false
	}
	l.log.LogAttrs(context.Background(), slog.LevelWarn, "cannot record the metrics history",
		slog.String("error", err.Error()), slog.Bool("retrying", retrying))
	return true
}
