package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// run runs one benchmark on the test Redis under a prefix of its own, checks the Record
// has the contract's shape and that the run left no job behind, and returns it.
func run(t *testing.T, o Options) Record {
	t.Helper()
	return runIn(t, redistest.Client(t), redistest.Prefix(t), o)
}

// runIn is run on rdb under prefix, for tests that read what the run left in Redis.
func runIn(t *testing.T, rdb redis.UniversalClient, prefix string, o Options) Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	o.Progress = &progress
	rec, err := Run(ctx, rdb, prefix, o)
	if err != nil {
		t.Fatalf("Run(%+v) err = %v", o, err)
	}
	line, _ := json.Marshal(rec)
	t.Logf("record: %s", line)
	t.Logf("progress: %q", progress.String())

	want := o.Concurrency
	if want == 0 {
		want = DefaultConcurrency
	}
	if rec.System != "jobs" || rec.Mode != o.Mode || rec.N != o.N || rec.C != want {
		t.Errorf("Run() = %+v, want system jobs, mode %s, n %d, c %d", rec, o.Mode, o.N, want)
	}
	if !(rec.P50Ms <= rec.P99Ms && rec.P99Ms <= rec.MaxMs) {
		t.Errorf("Run() p50 %v, p99 %v, max %v: want p50 <= p99 <= max", rec.P50Ms, rec.P99Ms, rec.MaxMs)
	}
	if s := progress.String(); !strings.HasPrefix(s, "\r") && s != "\n" || !strings.HasSuffix(s, "\n") {
		t.Errorf("progress output %q: want \\r-rewritten line ending in \\n", s)
	}
	assertNoJobsLeft(t, rdb, prefix)
	return rec
}

// assertNoJobsLeft checks the raw Redis state (KEYS.md's layout): no job hash and no
// non-empty ready/scheduled/active/retry/dead key under prefix.
func assertNoJobsLeft(t *testing.T, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, ":job:") || strings.HasSuffix(k, ":ready") ||
			strings.HasSuffix(k, ":scheduled") || strings.HasSuffix(k, ":active") ||
			strings.HasSuffix(k, ":retry") || strings.HasSuffix(k, ":dead") {
			t.Errorf("key %s left after the run", k)
		}
	}
}

func TestThroughputModes(t *testing.T) {
	for _, mode := range []string{ModeEnqueue, ModeEnqueueBatch, ModeProcess} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			rec := run(t, Options{Mode: mode, N: 200, Concurrency: 4, Payload: 64})
			if rec.JobsPerS <= 0 || rec.MaxMs <= 0 {
				t.Errorf("Run() jobs_per_s = %v, max_ms = %v, want both > 0", rec.JobsPerS, rec.MaxMs)
			}
		})
	}
}

// TestEnqueueBatchSeveralBatches covers a partial last batch and more batches than
// goroutines.
func TestEnqueueBatchSeveralBatches(t *testing.T) {
	t.Parallel()
	rec := run(t, Options{Mode: ModeEnqueueBatch, N: 2500, Concurrency: 2})
	if rec.JobsPerS <= 0 {
		t.Errorf("Run() jobs_per_s = %v, want > 0", rec.JobsPerS)
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	rec := run(t, Options{Mode: ModeLatency, N: 200})
	if rec.JobsPerS != 0 {
		t.Errorf("Run() jobs_per_s = %v, want 0 (latency has no throughput)", rec.JobsPerS)
	}
	if rec.P50Ms <= 0 || rec.P99Ms >= 1000 {
		t.Errorf("Run() p50 = %v ms, p99 = %v ms: want 0 < p50, p99 < 1000", rec.P50Ms, rec.P99Ms)
	}
}

func TestDelay(t *testing.T) {
	t.Parallel()
	rec := run(t, Options{Mode: ModeDelay, N: 5, Concurrency: 2})
	// A job is due 1-3 s after it is enqueued: a lateness of seconds means it ran at
	// promote time rather than due time, or waited for a poll.
	if rec.P99Ms >= 1000 || rec.P50Ms <= -1000 {
		t.Errorf("Run() lateness p50 = %v ms, p99 = %v ms: want within a second", rec.P50Ms, rec.P99Ms)
	}
}

// TestMemory is not parallel: used_memory is the whole server's, so other tests' jobs
// would count.
func TestMemory(t *testing.T) {
	rec := run(t, Options{Mode: ModeMemory, N: 1000, Payload: 100})
	// A job is a hash holding at least its payload, plus a list entry.
	if rec.BytesPerJob < 100 || rec.BytesPerJob > 10_000 {
		t.Errorf("Run() bytes_per_job = %v, want 100..10000", rec.BytesPerJob)
	}
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"unknown mode", Options{Mode: "fast", N: 10}, `unknown mode "fast"`},
		{"no mode", Options{N: 10}, `unknown mode ""`},
		{"zero n", Options{Mode: ModeEnqueue}, "N must be positive, got 0"},
		{"negative n", Options{Mode: ModeProcess, N: -1}, "N must be positive, got -1"},
		{"negative concurrency", Options{Mode: ModeEnqueue, N: 1, Concurrency: -2}, "concurrency -2 is negative"},
		{"negative payload", Options{Mode: ModeEnqueue, N: 1, Payload: -1}, "payload -1 bytes is negative"},
		{"huge payload", Options{Mode: ModeEnqueue, N: 1, Payload: 2 << 20}, "over the 1048576-byte limit"},
		{"negative queues", Options{Mode: ModeProcess, N: 1, Queues: -1}, "queues must be from 1 to 10000, got -1"},
		{"too many queues", Options{Mode: ModeProcess, N: 1, Queues: MaxQueues + 1}, "queues must be from 1 to 10000, got 10001"},
		{"negative backlog", Options{Mode: ModeLatency, N: 1, Backlog: -5}, "backlog -5 is negative"},
		{"fanout over queues", Options{Mode: ModeFanout, N: 1, Queues: 2}, "fanout runs on two queues of its own"},
		{"fanout with a backlog", Options{Mode: ModeFanout, N: 1, Backlog: 1}, "fanout runs on two queues of its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), rdb, redistest.Prefix(t), tc.o)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run(%+v) err = %v, want ErrInvalid saying %q", tc.o, err, tc.want)
			}
		})
	}
	if _, err := Run(context.Background(), nil, "x", Options{Mode: ModeEnqueue, N: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Run(nil client) err = %v, want ErrInvalid", err)
	}
	if _, err := Run(context.Background(), rdb, "bad prefix", Options{Mode: ModeEnqueue, N: 1}); err == nil {
		t.Errorf("Run(prefix %q) err = nil, want an error", "bad prefix")
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(1, 2), 50, 1 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{ms(1, 2, 3, 4), 99, 4 * time.Millisecond},
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 100, 100 * time.Millisecond},
	} {
		if got := percentile(tc.samples, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.samples, tc.p, got, tc.want)
		}
	}
}

func TestSummaryNegativeSamples(t *testing.T) {
	rec := summary(3, 0, []time.Duration{2 * time.Millisecond, -time.Millisecond, 500 * time.Microsecond})
	if rec.JobsPerS != 0 || rec.P50Ms != 0.5 || rec.P99Ms != 2 || rec.MaxMs != 2 {
		t.Errorf("summary() = %+v, want jobs_per_s 0, p50 0.5, p99 2, max 2", rec)
	}
}

func TestRecordJSON(t *testing.T) {
	line, err := json.Marshal(Record{System: "jobs", Mode: "enqueue", N: 10, C: 2, JobsPerS: 1.5,
		P50Ms: 0.1, P99Ms: 0.2, MaxMs: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"system":"jobs","mode":"enqueue","n":10,"c":2,"jobs_per_s":1.5,"p50_ms":0.1,"p99_ms":0.2,"max_ms":0.3}`
	if string(line) != want {
		t.Errorf("json.Marshal(Record) = %s, want %s", line, want)
	}
}
