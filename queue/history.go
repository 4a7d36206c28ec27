package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/scripts"
)

// The metrics history: what workers ran, per queue, job type and minute, kept in Redis so
// that charts of the last hours and days need no Prometheus. Workers add up in memory and
// flush about every 10 s (RecordMetrics, metrics.lua); History reads it back.

// History is a queue's metrics history over a span of time: one point per minute or per
// hour, oldest first, the last being the minute or hour in progress.
type History struct {
	Queue string
	// Step is the length of each point: time.Minute for spans up to 2 hours, time.Hour
	// for longer ones.
	Step   time.Duration
	Points []HistoryPoint
	// Total sums the whole span; its percentiles are those of all its attempts.
	Total HistoryStats
}

// HistoryPoint is one minute or hour of a queue's metrics history.
type HistoryPoint struct {
	// Start is the start of the minute or hour (UTC, by Redis's clock).
	Start time.Time
	HistoryStats
	// Types breaks the point down by job type; empty when nothing ran.
	Types map[string]HistoryStats
}

// HistoryStats counts the attempts that ended in a span of time, as the workers that ran
// them reported.
//
// Processed counts attempts that ended on a worker (done, retry or dead) and Failed those
// that failed; RunP50 and RunP95 are the median and 95th percentile of the handlers' run
// time, WaitP50 and WaitP95 of the wait from a job's due time (its run_at, or when it was
// enqueued) to the start of the attempt. A percentile is the upper bound of the histogram
// bucket it falls in: the buckets are half-octaves (bucket k holds 2^((k-1)/2) ms to
// 2^(k/2) ms: ..., 1 ms, 1.41 ms, 2 ms, 2.83 ms, 4 ms, ...; everything up to 1 ms is one
// bucket, and everything past 2^23.5 ms, about 3 h 53 min, reads as that bound), so it is
// at most 41% above the true value. Zero when no attempt ended.
//
// These are statistics, flushed by each worker about every 10 s, best effort: a worker
// that dies loses what it had not flushed, and an attempt whose worker died (its job
// reaped) is not in them. The exact daily counts are [QueueStats]' ProcessedToday and
// FailedToday (the daily counters, kept 90 days: see KEYS.md).
type HistoryStats struct {
	Processed, Failed int64
	RunP50, RunP95    time.Duration
	WaitP50, WaitP95  time.Duration

	run, wait [proto.HistBuckets]int64
}

// MaxHistory is the longest span History reads: hour buckets are kept 30 days.
const MaxHistory = 30 * 24 * time.Hour

// The hour buckets' retention is MaxHistory: a longer one would keep what nobody reads,
// a shorter one would answer part of a span with zeros.
var _ = [1]struct{}{}[proto.MetricsHourRetention-MaxHistory]

// History returns queue's metrics history over the span ending now (Redis's clock):
// one point per minute for a span of up to 2 hours (minute buckets are kept 48 hours),
// one per hour for longer spans, up to MaxHistory. A span under a minute or over
// MaxHistory is ErrInvalid. A queue nothing ran on has points with zero counts.
func (c *Client) History(ctx context.Context, queue string, span time.Duration) (*History, error) {
	hs, err := c.Histories(ctx, []string{queue}, span)
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// Histories is [Client.History] for several queues at once, in their order, with one
// clock read and one pipelined round trip for all (span/step reads per queue).
func (c *Client) Histories(ctx context.Context, queues []string, span time.Duration) ([]*History, error) {
	for _, q := range queues {
		if err := ValidateQueue(q); err != nil {
			return nil, err
		}
	}
	if span < time.Minute || span > MaxHistory {
		return nil, invalid("history span %s: want from 1m to %s", span, MaxHistory)
	}
	step := time.Minute
	if span > 2*time.Hour {
		step = time.Hour
	}
	now, err := c.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	n := int((span + step - 1) / step)
	last := now.UnixMilli() / step.Milliseconds()
	pipe := c.rdb.Pipeline()
	cmds := make([][]*redis.MapStringStringCmd, len(queues))
	for qi, queue := range queues {
		qk := c.keys.queue(queue)
		cmds[qi] = make([]*redis.MapStringStringCmd, n)
		for i := range n {
			b := last - int64(n-1-i)
			key := qk.metricsMinute(b)
			if step == time.Hour {
				key = qk.metricsHour(b)
			}
			cmds[qi][i] = pipe.HGetAll(ctx, key)
		}
	}
	if len(queues) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
	}
	out := make([]*History, len(queues))
	for qi, queue := range queues {
		out[qi] = buildHistory(queue, step, last, cmds[qi])
	}
	return out, nil
}

// buildHistory sums the metrics hashes read for one queue (cmds[i]: the bucket
// last-(n-1-i) of step) into its History.
func buildHistory(queue string, step time.Duration, last int64, cmds []*redis.MapStringStringCmd) *History {
	n := len(cmds)
	h := &History{Queue: queue, Step: step, Points: make([]HistoryPoint, n)}
	for i, cmd := range cmds {
		b := last - int64(n-1-i)
		p := &h.Points[i]
		p.Start = time.UnixMilli(b * step.Milliseconds()).UTC()
		types := map[string]*HistoryStats{}
		for field, v := range cmd.Val() {
			typ, add := parseMetricsField(field, v)
			if add == nil {
				continue
			}
			s := types[typ]
			if s == nil {
				s = &HistoryStats{}
				types[typ] = s
			}
			add(s)
			add(&p.HistoryStats)
			add(&h.Total)
		}
		p.finish()
		if len(types) > 0 {
			p.Types = make(map[string]HistoryStats, len(types))
			for typ, s := range types {
				s.finish()
				p.Types[typ] = *s
			}
		}
	}
	h.Total.finish()
	return h
}

// parseMetricsField reads one field of a metrics hash (see metricsFields): the job type
// it counts, and a function that adds its value to a HistoryStats. A field it does not
// know (written by a newer version) gives nil.
func parseMetricsField(field, value string) (string, func(*HistoryStats)) {
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 0 {
		return "", nil
	}
	kind, rest, ok := strings.Cut(field, ":")
	if !ok {
		return "", nil
	}
	switch kind {
	case "processed":
		return rest, func(s *HistoryStats) { s.Processed += n }
	case "failed":
		return rest, func(s *HistoryStats) { s.Failed += n }
	case "run", "wait":
		ks, typ, ok := strings.Cut(rest, ":")
		k, err := strconv.Atoi(ks)
		if !ok || err != nil || k < 0 || k >= proto.HistBuckets {
			return "", nil
		}
		if kind == "run" {
			return typ, func(s *HistoryStats) { s.run[k] += n }
		}
		return typ, func(s *HistoryStats) { s.wait[k] += n }
	}
	return "", nil
}

// finish computes the percentiles from the histograms.
func (s *HistoryStats) finish() {
	s.RunP50, s.RunP95 = quantile(&s.run, 0.50), quantile(&s.run, 0.95)
	s.WaitP50, s.WaitP95 = quantile(&s.wait, 0.50), quantile(&s.wait, 0.95)
}

// quantile returns the upper bound of the bucket that holds the q-quantile of h, or 0 for
// an empty h.
func quantile(h *[proto.HistBuckets]int64, q float64) time.Duration {
	var total int64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	var seen int64
	for k, n := range h {
		if seen += n; seen >= rank {
			return proto.HistUpper(k)
		}
	}
	return proto.HistUpper(proto.HistBuckets - 1)
}

// RecordMetrics adds samples to the queues' metrics history: each sample to its minute's
// hash and its hour's hash, one metrics.lua call per queue, all pipelined in one round
// trip. It returns the samples of the calls that certainly did not run (an error reply,
// no connection): sending them again cannot count them twice. The error of a call that
// may have run wraps ErrUncertain.
func (c broker) RecordMetrics(ctx context.Context, samples []*proto.MetricsSample) (retry []*proto.MetricsSample, err error) {
	byQueue := map[string][]*proto.MetricsSample{}
	var order []string
	for _, s := range samples {
		if _, ok := byQueue[s.Queue]; !ok {
			order = append(order, s.Queue)
		}
		byQueue[s.Queue] = append(byQueue[s.Queue], s)
	}
	calls := make([]*scriptCall, 0, len(order))
	for _, q := range order {
		calls = append(calls, c.metricsCall(q, byQueue[q]))
	}
	c.runScripts(ctx, nil, calls)
	for i, call := range calls {
		if e := call.cmd.Err(); e != nil {
			if notSent(e) {
				retry = append(retry, byQueue[order[i]]...)
			}
			if err == nil {
				err = outcome(ctx, "record metrics of "+order[i], e)
			}
		}
	}
	return retry, err
}

// metricsCall builds the metrics.lua call for the samples of queue q.
func (c *Client) metricsCall(q string, samples []*proto.MetricsSample) *scriptCall {
	qk := c.keys.queue(q)
	const minuteMs, hourMs = 60_000, 3_600_000
	type bucket struct {
		key      string
		expireAt int64
		fields   map[string]int64
	}
	buckets := map[string]*bucket{}
	add := func(key string, expireAt int64, s *proto.MetricsSample) {
		b := buckets[key]
		if b == nil {
			b = &bucket{key: key, expireAt: expireAt, fields: map[string]int64{}}
			buckets[key] = b
		}
		metricsFields(b.fields, s)
	}
	for _, s := range samples {
		hour := s.Minute * minuteMs / hourMs
		add(qk.metricsMinute(s.Minute), (s.Minute+1)*minuteMs+ms(proto.MetricsMinuteRetention), s)
		add(qk.metricsHour(hour), (hour+1)*hourMs+ms(proto.MetricsHourRetention), s)
	}
	keys := make([]string, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	args := make([]any, 0, len(keys)*8)
	for _, k := range keys {
		args = append(args, buckets[k].expireAt)
	}
	for _, k := range keys {
		f := buckets[k].fields
		names := make([]string, 0, len(f))
		for name := range f {
			names = append(names, name)
		}
		slices.Sort(names)
		args = append(args, len(names))
		for _, name := range names {
			args = append(args, name, f[name])
		}
	}
	return &scriptCall{script: scripts.Metrics, keys: keys, args: args}
}

// metricsFields adds the fields of s to f: processed:<type>, failed:<type>,
// run:<k>:<type> and wait:<k>:<type> (k: the histogram bucket), leaving out zeros.
func metricsFields(f map[string]int64, s *proto.MetricsSample) {
	if s.Processed > 0 {
		f["processed:"+s.Type] += s.Processed
	}
	if s.Failed > 0 {
		f["failed:"+s.Type] += s.Failed
	}
	for k := range proto.HistBuckets {
		if n := s.Run[k]; n > 0 {
			f["run:"+strconv.Itoa(k)+":"+s.Type] += n
		}
		if n := s.Wait[k]; n > 0 {
			f["wait:"+strconv.Itoa(k)+":"+s.Type] += n
		}
	}
}

// The shape of `jobs stats --history --json` (and the dashboard's): times in RFC 3339
// (UTC), durations in ms.
type historyJSON struct {
	Name   string             `json:"name"`
	StepS  float64            `json:"step_s"`
	Total  historyStatsJSON   `json:"total"`
	Points []historyPointJSON `json:"points"`
}

type historyPointJSON struct {
	Start time.Time `json:"start"`
	historyStatsJSON
	Types map[string]historyStatsJSON `json:"types"`
}

type historyStatsJSON struct {
	Processed int64   `json:"processed"`
	Failed    int64   `json:"failed"`
	RunP50    float64 `json:"run_p50_ms"`
	RunP95    float64 `json:"run_p95_ms"`
	WaitP50   float64 `json:"wait_p50_ms"`
	WaitP95   float64 `json:"wait_p95_ms"`
}

func statsJSON(s HistoryStats) historyStatsJSON {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return historyStatsJSON{Processed: s.Processed, Failed: s.Failed, RunP50: ms(s.RunP50), RunP95: ms(s.RunP95),
		WaitP50: ms(s.WaitP50), WaitP95: ms(s.WaitP95)}
}

// MarshalJSON renders the history as `jobs stats --history --json` prints each queue:
// {"name","step_s","total","points":[{"start","processed","failed","run_p50_ms",...,"types"}]}.
func (h *History) MarshalJSON() ([]byte, error) {
	q := historyJSON{Name: h.Queue, StepS: h.Step.Seconds(), Total: statsJSON(h.Total),
		Points: make([]historyPointJSON, len(h.Points))}
	for i, p := range h.Points {
		types := make(map[string]historyStatsJSON, len(p.Types))
		for t, s := range p.Types {
			types[t] = statsJSON(s)
		}
		q.Points[i] = historyPointJSON{Start: p.Start, historyStatsJSON: statsJSON(p.HistoryStats), Types: types}
	}
	return json.Marshal(q)
}

// DailyTotal is what a queue's daily counters hold over a span of days: the attempts
// that ended (done, failed or reaped) and those that failed. Exact, unlike [History]'s
// statistics: the scripts that end attempts count them (KEYS.md, stats:processed).
type DailyTotal struct {
	Queue     string `json:"queue"`
	Processed int64  `json:"processed"`
	Failed    int64  `json:"failed"`
}

// DailyTotals sums the daily counters of each queue over the last days UTC days, today
// (by Redis's clock) included, in one clock read and one pipelined round trip (2 x days
// GETs per queue). days goes from 1 to 90 (the counters' retention).
func (c *Client) DailyTotals(ctx context.Context, queues []string, days int) ([]DailyTotal, error) {
	if days < 1 || days > 90 {
		return nil, invalid("days %d: want 1 to 90", days)
	}
	for _, q := range queues {
		if err := ValidateQueue(q); err != nil {
			return nil, err
		}
	}
	now, err := c.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("daily totals: %w", err)
	}
	pipe := c.rdb.Pipeline()
	type pair struct{ processed, failed *redis.StringCmd }
	cmds := make([][]pair, len(queues))
	for qi, q := range queues {
		k := c.keys.queue(q)
		for d := range days {
			day := now.UTC().AddDate(0, 0, -d).Format(time.DateOnly)
			cmds[qi] = append(cmds[qi], pair{pipe.Get(ctx, k.stats+"processed:"+day), pipe.Get(ctx, k.stats+"failed:"+day)})
		}
	}
	if len(queues) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("daily totals: %w", err)
		}
	}
	out := make([]DailyTotal, len(queues))
	for qi, q := range queues {
		out[qi].Queue = q
		for _, p := range cmds[qi] {
			n, _ := p.processed.Int64()
			f, _ := p.failed.Int64()
			out[qi].Processed += n
			out[qi].Failed += f
		}
	}
	return out, nil
}
