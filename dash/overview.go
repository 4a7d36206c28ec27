package dash

import (
	"context"
	"net/http"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// overviewData is the overview's data, and its JSON (Accept: application/json): the
// queues as `jobs stats --json` prints them, the throughput of the last hour, day and
// week from the metrics history, and the Redis server.
type overviewData struct {
	Queues     []queue.QueueStats  `json:"queues"`
	Throughput []spanTotal         `json:"throughput"`
	Chart      chartData           `json:"chart"`
	Redis      queue.ServerInfo    `json:"redis"`
	Stuck      map[string][]string `json:"stuck"` // queue -> why its ready jobs do not move
	Warnings   []string            `json:"warnings"`
	// HistoryAt is when the throughput and chart were read: they are shared by every
	// request for Options.SnapshotEvery.
	HistoryAt time.Time `json:"history_at"`
	// Rows are the queues as the page shows them.
	Rows []overviewRow `json:"-"`
}

// overviewRow is one queue's row: its counts, its page's URL (escaped once, not once per
// link: the overview of 1,000 queues spends most of its time in the template) and why
// its jobs are not moving.
type overviewRow struct {
	S   queue.QueueStats
	URL string
	Why []string
}

// spanTotal sums the attempts of every queue that ended over a span: 1h and 24h from the
// workers' metrics history (statistics, flushed about every 10 s), 7d from the exact
// daily counters (the last 7 UTC days, today included).
type spanTotal struct {
	Span      string `json:"span"` // 1h, 24h, 7d
	Processed int64  `json:"processed"`
	Failed    int64  `json:"failed"`
}

// chartData is the last hour, per minute, summed over the queues: what the chart draws
// (the page carries it as a JSON data island, #chart-data).
type chartData struct {
	Time      []int64 `json:"t"` // minute starts, Unix seconds
	Processed []int64 `json:"processed"`
	Failed    []int64 `json:"failed"`
}

// snapshot is the overview's metrics history, read once per Options.SnapshotEvery and
// shared by every request (N open tabs never multiply the load on Redis).
type snapshot struct {
	at         time.Time
	throughput []spanTotal
	chart      chartData
}

// history returns the shared snapshot of the queues' metrics history. The first request
// reads it; later ones get the last snapshot at once, and the first that finds it older
// than SnapshotEvery starts one read in the background for those after it. So no
// request but the very first waits for it, and N tabs cost one read per period.
func (h *Handler) history(ctx context.Context, qs []string) (*snapshot, error) {
	h.mu.Lock()
	s, busy := h.snap, h.reading
	stale := s == nil || h.hostNow().Sub(s.at) >= h.opts.SnapshotEvery
	if s != nil && stale && !busy {
		h.reading = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), h.opts.Timeout)
			defer cancel()
			fresh, err := h.readHistory(ctx, qs)
			h.mu.Lock()
			defer h.mu.Unlock()
			h.reading = false
			if err != nil {
				h.opts.Logger.Warn("dash: metrics history not read", "err", err)
				return
			}
			h.snap = fresh
		}()
	}
	h.mu.Unlock()
	if s != nil {
		return s, nil
	}
	// No snapshot yet: read one now (concurrent first requests may each read once).
	fresh, err := h.readHistory(ctx, qs)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.snap == nil || h.snap.at.Before(fresh.at) {
		h.snap = fresh
	}
	return fresh, nil
}

// readHistory reads the throughput of the last hour (minute buckets: the chart too) and
// day (hour buckets) from the metrics history, and of the last 7 days from the daily
// counters: 98 reads per queue, in three pipelined round trips.
func (h *Handler) readHistory(ctx context.Context, qs []string) (*snapshot, error) {
	s := &snapshot{at: h.hostNow()}
	hour, err := h.client.Histories(ctx, qs, time.Hour)
	if err != nil {
		return nil, err
	}
	day, err := h.client.Histories(ctx, qs, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	week, err := h.client.DailyTotals(ctx, qs, 7)
	if err != nil {
		return nil, err
	}
	s.chart = sumChart(hour)
	for _, x := range []struct {
		span string
		hs   []*queue.History
	}{{"1h", hour}, {"24h", day}} {
		t := spanTotal{Span: x.span}
		for _, q := range x.hs {
			t.Processed += q.Total.Processed
			t.Failed += q.Total.Failed
		}
		s.throughput = append(s.throughput, t)
	}
	t := spanTotal{Span: "7d"}
	for _, q := range week {
		t.Processed += q.Processed
		t.Failed += q.Failed
	}
	s.throughput = append(s.throughput, t)
	return s, nil
}

func sumChart(hs []*queue.History) chartData {
	var c chartData
	for qi, x := range hs {
		for i, p := range x.Points {
			if qi == 0 {
				c.Time = append(c.Time, p.Start.Unix())
				c.Processed = append(c.Processed, 0)
				c.Failed = append(c.Failed, 0)
			}
			if i < len(c.Time) {
				c.Processed[i] += p.Processed
				c.Failed[i] += p.Failed
			}
		}
	}
	return c
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	stats, err := h.client.Stats(ctx)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	names := make([]string, len(stats))
	for i, s := range stats {
		names[i] = s.Name
	}
	snap, err := h.history(ctx, names)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	info, err := h.client.ServerInfo(ctx)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	now, err := h.redisNow(ctx)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	d := overviewData{Queues: stats, Throughput: snap.throughput, Chart: snap.chart, Redis: info,
		Stuck: map[string][]string{}, Warnings: serverWarnings(info), HistoryAt: snap.at.UTC()}
	if d.Queues == nil {
		d.Queues = []queue.QueueStats{}
	}
	d.Rows = make([]overviewRow, len(stats))
	for i, s := range stats {
		why := stuck(s, now)
		if len(why) > 0 {
			d.Stuck[s.Name] = why
		}
		d.Rows[i] = overviewRow{S: s, URL: h.opts.BasePath + "/queues/" + segment(s.Name), Why: why}
	}
	h.render(w, r, "overview", "Overview", d, nil)
}

// stuck says why a queue's ready jobs are not being claimed, as far as its counts and
// limits show, now being Redis's time.
func stuck(s queue.QueueStats, now time.Time) []string {
	var why []string
	if s.Paused {
		why = append(why, "paused: workers claim nothing until it is resumed")
	}
	if s.Workers == 0 && (s.Ready > 0 || s.Scheduled > 0 || s.Retry > 0) {
		why = append(why, "no live worker claims from this queue")
	}
	if s.WaitingOn != "" {
		why = append(why, limited(s, now))
	}
	return why
}

// limited says which of its limits holds a queue's ready jobs back, and until when.
func limited(s queue.QueueStats, now time.Time) string {
	msg := "limited: its " + string(s.WaitingOn) + " limit is reached"
	switch s.WaitingOn {
	case queue.ConcurrencyLimit:
		msg = "limited: as many of its jobs run as its concurrency limit allows"
	case queue.KeyWait:
		msg = "limited: each of its limit keys with jobs ready waits on its own limits (key concurrency, " +
			"key rate or a handler's pause: jobs limit ls)"
	}
	if s.WaitingUntil.IsZero() {
		return msg
	}
	msg += "; the next may start at " + s.WaitingUntil.UTC().Format("15:04:05.000Z")
	if d := s.WaitingUntil.Sub(now); d > 0 {
		msg += " (in " + roundDur(d) + ")"
	}
	if s.WaitingOn == queue.ConcurrencyLimit {
		msg += ", when a running job ends or its lease expires"
	}
	return msg
}

// serverWarnings are what the Redis server's settings put at risk.
func serverWarnings(info queue.ServerInfo) []string {
	var w []string
	if info.Policy != "" && info.Policy != "noeviction" {
		w = append(w, "maxmemory-policy is "+info.Policy+": Redis may evict job keys and lose jobs (want noeviction)")
	}
	if info.MaxBytes > 0 && info.UsedBytes >= info.MaxBytes {
		w = append(w, "Redis is full (used_memory >= maxmemory): it refuses writes, so enqueues and claims fail")
	}
	return w
}
