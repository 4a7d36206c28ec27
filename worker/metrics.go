package worker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobs-dev/jobs/queue"
)

// metrics are the worker's Prometheus series. A nil *metrics (no Config.Registerer) is
// valid and records nothing.
type metrics struct {
	processed   *prometheus.CounterVec
	postponed   *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	busy        prometheus.Gauge
	concurrency prometheus.Gauge
}

// Outcomes of jobs_processed_total.
const (
	outcomeSuccess = "success"
	outcomeRetry   = "retry"
	outcomeDead    = "dead"
)

func newMetrics(reg prometheus.Registerer, w *Worker) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobs_processed_total",
			Help: "Attempts finished, by queue, job type and outcome (success, retry, dead).",
		}, []string{"queue", "type", "outcome"}),
		postponed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobs_postponed_total",
			Help: "Jobs given back unrun or run again later without counting an attempt, by queue, job type and reason: snooze (Snooze, RetryAfter, exit 76), pause_key (PauseKey, exit 77), postpone (an exclusive lock held, no handler for the type).",
		}, []string{"queue", "type", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jobs_duration_seconds",
			Help:    "Time from the start of an attempt to its outcome, by queue and job type.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 1800},
		}, []string{"queue", "type"}),
		busy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobs_worker_busy", Help: "Jobs running now on this worker.",
		}),
		concurrency: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobs_worker_concurrency", Help: "Most jobs this worker runs at once (Config.Concurrency).",
		}),
	}
	m.concurrency.Set(float64(w.cfg.Concurrency))
	depth := NewDepthCollector(w.client, w.queues)
	for _, c := range []prometheus.Collector{m.processed, m.postponed, m.duration, m.busy, m.concurrency, depth} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observe(job *queue.Job, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.processed.WithLabelValues(job.Queue, job.Type, outcome).Inc()
	m.duration.WithLabelValues(job.Queue, job.Type).Observe(took.Seconds())
}

// postpone counts a job given back for later without an attempt counted (reason: see
// jobs_postponed_total's help).
func (m *metrics) postpone(job *queue.Job, reason string) {
	if m != nil {
		m.postponed.WithLabelValues(job.Queue, job.Type, reason).Inc()
	}
}

func (m *metrics) setBusy(n int64) {
	if m != nil {
		m.busy.Set(float64(n))
	}
}

// DepthCollector reports jobs_queue_depth{queue,state} read from Redis when Prometheus
// scrapes, in one pipelined round trip, so the figure is never stale and costs nothing
// between scrapes.
type DepthCollector struct {
	client *queue.Client
	queues []string // nil: every known queue
	desc   *prometheus.Desc
	errs   prometheus.Counter
}

// NewDepthCollector returns a collector for the given queues (nil: all known queues).
func NewDepthCollector(client *queue.Client, queues []string) *DepthCollector {
	return &DepthCollector{client: client, queues: queues,
		desc: prometheus.NewDesc("jobs_queue_depth", "Jobs in each state of each queue, read at scrape time.",
			[]string{"queue", "state"}, nil),
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobs_queue_depth_errors_total", Help: "Scrapes whose queue depths could not be read from Redis.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (d *DepthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.desc
	d.errs.Describe(ch)
}

// Collect implements prometheus.Collector.
func (d *DepthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	depths, err := d.client.Depths(ctx, d.queues)
	if err != nil {
		d.errs.Inc()
	}
	for q, states := range depths {
		for st, n := range states {
			ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, float64(n), q, string(st))
		}
	}
	d.errs.Collect(ch)
}
