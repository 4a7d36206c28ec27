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
}

// spanTotal sums the metrics history of every queue over a span.
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

var spans = []struct {
	name string
	d    time.Duration
}{{"1h", time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}}

// history returns the shared snapshot of the queues' metrics history, reading it again
// when it is older than SnapshotEvery. Concurrent requests wait for one read.
func (h *Handler) history(ctx context.Context, qs []string) (*snapshot, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.snap != nil && time.Since(h.snap.at) < h.opts.SnapshotEvery {
		return h.snap, nil
	}
	s := &snapshot{at: time.Now()}
	for i, sp := range spans {
		hs, err := h.client.Histories(ctx, qs, sp.d)
		if err != nil {
			return nil, err
		}
		t := spanTotal{Span: sp.name}
		for _, x := range hs {
			t.Processed += x.Total.Processed
			t.Failed += x.Total.Failed
		}
		s.throughput = append(s.throughput, t)
		if i == 0 {
			s.chart = sumChart(hs)
		}
	}
	h.snap = s
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
	d := overviewData{Queues: stats, Throughput: snap.throughput, Chart: snap.chart, Redis: info,
		Stuck: map[string][]string{}, Warnings: serverWarnings(info), HistoryAt: snap.at.UTC()}
	if d.Queues == nil {
		d.Queues = []queue.QueueStats{}
	}
	for _, s := range stats {
		if why := stuck(s); len(why) > 0 {
			d.Stuck[s.Name] = why
		}
	}
	h.render(w, r, "overview", "Overview", d, nil)
}

// stuck says why a queue's ready jobs are not being claimed, as far as its counts show.
func stuck(s queue.QueueStats) []string {
	var why []string
	if s.Paused {
		why = append(why, "paused: workers claim nothing until it is resumed")
	}
	if s.Workers == 0 && (s.Ready > 0 || s.Scheduled > 0 || s.Retry > 0) {
		why = append(why, "no live worker claims from this queue")
	}
	return why
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
