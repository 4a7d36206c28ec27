package queue

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// Benchmarks of the hot path against the real test Redis (go test -bench . ./queue).
// Compare runs with benchstat; absolute figures depend on the machine.

func benchClient(b *testing.B) *Client {
	b.Helper()
	c, err := NewClient(redistest.Client(b), Config{Prefix: redistest.Prefix(b), DoneRetention: -1})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

var payload100 = bytes.Repeat([]byte("x"), 100)

// BenchmarkEnqueue is one goroutine enqueueing one job at a time: with a context that
// cannot end, one that can (an HTTP request's), and with the event stream off.
func BenchmarkEnqueue(b *testing.B) {
	cancellable, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, v := range []struct {
		name   string
		ctx    context.Context
		events int
	}{{"background", ctx, 0}, {"cancellable", cancellable, 0}, {"events=off", ctx, -1}} {
		b.Run(v.name, func(b *testing.B) {
			c, err := NewClient(redistest.Client(b), Config{Prefix: redistest.Prefix(b), DoneRetention: -1, Events: v.events})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			usec, calls := evalshaStats(b, c)
			for b.Loop() {
				if _, err := c.Enqueue(v.ctx, "bench", payload100); err != nil {
					b.Fatal(err)
				}
			}
			usec2, calls2 := evalshaStats(b, c)
			if calls2 > calls {
				b.ReportMetric(float64(usec2-usec)/float64(calls2-calls), "redis-us/call")
			}
		})
	}
}

// evalshaStats returns the microseconds Redis spent in EVALSHA so far and the number of
// calls (INFO commandstats): the difference over a benchmark is what its script calls
// cost Redis itself, apart from the round trip and the client.
func evalshaStats(b *testing.B, c *Client) (usec, calls int64) {
	b.Helper()
	info, err := c.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "usec":
				usec = n
			case "calls":
				calls = n
			}
		}
	}
	return usec, calls
}

// BenchmarkRoundTripFloor measures what any single-goroutine call costs on this machine,
// beside BenchmarkEnqueue: PING, and a script that does nothing. One goroutine waiting for
// each reply cannot enqueue faster than the round trip, whatever the script does.
func BenchmarkRoundTripFloor(b *testing.B) {
	rdb := redistest.Client(b)
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	noop := redis.NewScript("return 1")
	b.Run("script-return-1", func(b *testing.B) {
		for b.Loop() {
			if err := noop.Run(ctx, rdb, []string{"{bench}"}).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEnqueueParallel is many goroutines enqueuing one job each (a web server):
// concurrent calls are coalesced into shared script calls.
func BenchmarkEnqueueParallel(b *testing.B) {
	c := benchClient(b)
	b.ReportAllocs()
	b.SetParallelism(25) // x GOMAXPROCS goroutines
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Enqueue(ctx, "bench", payload100); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkEnqueueBatch1000(b *testing.B) {
	c := benchClient(b)
	batch := make([]BatchJob, 1000)
	for i := range batch {
		batch[i] = BatchJob{Type: "bench", Payload: payload100}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimAck100 claims 100 jobs in one call and acknowledges them concurrently,
// as a worker of concurrency 100 does: the per-job cost of the two transitions.
func BenchmarkClaimAck100(b *testing.B) {
	c := benchClient(b)
	batch := make([]BatchJob, 100)
	for i := range batch {
		batch[i] = BatchJob{Type: "bench", Payload: payload100}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if _, err := c.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		jobs, err := c.broker().Claim(ctx, "default", 100, time.Minute, "w")
		if err != nil || len(jobs) != 100 {
			b.Fatalf("Claim() = %d, %v", len(jobs), err)
		}
		done := make(chan error, len(jobs))
		for _, j := range jobs {
			go func() { done <- c.broker().Ack(ctx, j, nil) }()
		}
		for range jobs {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkAckClaim is a busy worker's round: acknowledge the batch of jobs that just
// finished and claim as many new ones. "separate" acks them with concurrent Ack calls
// (coalesced into one script call) and then calls Claim: two round trips; "combined" is
// one AckClaim call. Per-job cost: divide ns/op by the batch size, or read jobs/s.
func BenchmarkAckClaim(b *testing.B) {
	separate := func(c *Client, held []*Job, n int) ([]*Job, error) {
		errs := make(chan error, len(held))
		for _, j := range held {
			go func() { errs <- c.broker().Ack(ctx, j, nil) }()
		}
		for range held {
			if err := <-errs; err != nil {
				return nil, err
			}
		}
		return c.broker().Claim(ctx, "default", n, time.Minute, "w")
	}
	combined := func(c *Client, held []*Job, n int) ([]*Job, error) {
		done := make([]Finished, len(held))
		for i, j := range held {
			done[i] = Finished{Job: j}
		}
		acked, jobs, err := c.broker().ackFinished(ctx, "default", done, n, time.Minute, "w")
		for _, e := range acked {
			err = cmp.Or(err, e)
		}
		return jobs, err
	}
	for _, batch := range []int{10, 100} {
		for _, v := range []struct {
			name  string
			round func(*Client, []*Job, int) ([]*Job, error)
		}{{"separate", separate}, {"combined", combined}} {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, v.name), func(b *testing.B) {
				c := benchClient(b)
				refill := make([]BatchJob, 2000)
				for i := range refill {
					refill[i] = BatchJob{Type: "bench", Payload: payload100}
				}
				var held []*Job
				ready := 0
				b.ReportAllocs()
				for b.Loop() {
					if ready < batch {
						b.StopTimer()
						if _, err := c.EnqueueBatch(ctx, refill); err != nil {
							b.Fatal(err)
						}
						ready += len(refill)
						b.StartTimer()
					}
					jobs, err := v.round(c, held, batch)
					if err != nil || len(jobs) != batch {
						b.Fatalf("round = %d jobs, %v; want %d", len(jobs), err, batch)
					}
					held, ready = jobs, ready-len(jobs)
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}

// BenchmarkAckClaimEvents is BenchmarkAckClaim's combined round (ack 100, claim 100, one
// call) with the event stream on (the default) and off: what events cost a busy worker.
// Compare the two ns/op, interleaved with -count.
func BenchmarkAckClaimEvents(b *testing.B) {
	const batch = 100
	for _, v := range []struct {
		name   string
		events int
	}{{"off", -1}, {"on", 0}} {
		b.Run("events="+v.name, func(b *testing.B) {
			c, err := NewClient(redistest.Client(b), Config{Prefix: redistest.Prefix(b), DoneRetention: -1, Events: v.events})
			if err != nil {
				b.Fatal(err)
			}
			refill := make([]BatchJob, 2000)
			for i := range refill {
				refill[i] = BatchJob{Type: "bench", Payload: payload100}
			}
			var held []*Job
			ready := 0
			for b.Loop() {
				if ready < batch {
					b.StopTimer()
					if _, err := c.EnqueueBatch(ctx, refill); err != nil {
						b.Fatal(err)
					}
					ready += len(refill)
					b.StartTimer()
				}
				_, jobs, err := c.broker().AckClaim(ctx, "default", held, make([][]byte, len(held)), batch, time.Minute, "w")
				if err != nil || len(jobs) != batch {
					b.Fatalf("round = %d jobs, %v; want %d", len(jobs), err, batch)
				}
				held, ready = jobs, ready-len(jobs)
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkAckClaimLimits is BenchmarkAckClaim's combined round (ack n, claim n, one call)
// on a queue without limits and on one whose limits never bind (concurrency 10,000, rate
// 1,000,000/s with burst 1,000): what checking and taking the limits costs a busy worker.
// Compare the ns/op of the two, interleaved with -count.
func BenchmarkAckClaimLimits(b *testing.B) {
	for _, batch := range []int{10, 100} {
		for _, v := range []struct {
			name  string
			limit Limit
		}{{"none", Limit{}}, {"unbound", Limit{Concurrency: 10_000, Rate: 1_000_000, Period: time.Second, Burst: 1000}}} {
			b.Run(fmt.Sprintf("batch=%d/limits=%s", batch, v.name), func(b *testing.B) {
				c := benchClient(b)
				if v.limit != (Limit{}) {
					if err := c.SetLimit(ctx, "default", v.limit); err != nil {
						b.Fatal(err)
					}
				}
				refill := make([]BatchJob, 2000)
				for i := range refill {
					refill[i] = BatchJob{Type: "bench", Payload: payload100}
				}
				var held []*Job
				ready := 0
				for b.Loop() {
					if ready < batch {
						b.StopTimer()
						if _, err := c.EnqueueBatch(ctx, refill); err != nil {
							b.Fatal(err)
						}
						ready += len(refill)
						b.StartTimer()
					}
					held = limitedRound(b, c, held, batch)
					ready -= len(held)
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}

// BenchmarkAckClaimKeys is BenchmarkAckClaimLimits's round (ack n, claim n, one call;
// n = 100, and 10 as a worker of concurrency 10 claims) under limits that never bind
// (concurrency 10,000, rate 1,000,000/s, key concurrency 10,000), with the jobs spread
// over 0 (no limit key), 10 or 1,000 limit keys (30 jobs each, refilled), and, as the
// reference, unkeyed jobs without limits ("none"): what keyed jobs cost a busy worker.
// redis-us/job is Redis's own CPU time per job (INFO cpu, the refills left out), which
// other work on the machine disturbs less than ns/op. Each round acks the claim before
// the last, as a worker's claim-ahead does: acking every held job before each claim kept
// active a listpack of at most 128 leases, whose every ZREM and ZADD scans it, and hid
// most of what keyed jobs cost (0.96x of none where the worker saw 0.90x).
func BenchmarkAckClaimKeys(b *testing.B) {
	for _, batch := range []int{100, 10} {
		for _, keys := range []int{-1, 0, 10, 1000} {
			name := fmt.Sprintf("keys=%d", keys)
			if keys < 0 {
				name = "none"
			}
			b.Run(fmt.Sprintf("batch=%d/%s", batch, name), func(b *testing.B) {
				c := benchClient(b)
				if keys >= 0 {
					l := Limit{Concurrency: 10_000, Rate: 1_000_000, Period: time.Second, Burst: 1000, KeyConcurrency: 10_000}
					if err := c.SetLimit(ctx, "default", l); err != nil {
						b.Fatal(err)
					}
				}
				refill := make([]BatchJob, 30_000)
				for i := range refill {
					refill[i] = BatchJob{Type: "bench", Payload: payload100}
					if keys > 0 {
						refill[i].Options = []Option{LimitKey(fmt.Sprint("k", i%keys))}
					}
				}
				var held, last []*Job // the claim before the last, acked next; the last
				ready := 0
				var refills time.Duration
				start := redisCPU(b, c)
				for b.Loop() {
					if ready < batch {
						b.StopTimer()
						before := redisCPU(b, c)
						if _, err := c.EnqueueBatch(ctx, refill); err != nil {
							b.Fatal(err)
						}
						refills += redisCPU(b, c) - before
						ready += len(refill)
						b.StartTimer()
					}
					held, last = last, limitedRound(b, c, held, batch)
					ready -= batch
				}
				cpu := redisCPU(b, c) - start - refills
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*batch), "redis-us/job")
			})
		}
	}
}

// redisCPU is the CPU time the Redis server has used (INFO cpu: user and system).
func redisCPU(b *testing.B, c *Client) time.Duration {
	b.Helper()
	info, err := c.rdb.Info(ctx, "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// limitedRound is a round of the limits' AckClaim benchmarks: ack held, claim batch jobs
// (queue "default"). It fails the benchmark unless the claim got them all and met no limit.
func limitedRound(b *testing.B, c *Client, held []*Job, batch int) []*Job {
	b.Helper()
	_, jobs, lim, err := c.broker().AckClaimLimited(ctx, "default", held, make([][]byte, len(held)), batch, time.Minute, "w")
	if err != nil || len(jobs) != batch || lim.By != "" {
		b.Fatalf("round = %d jobs, %+v, %v; want %d, no limit met", len(jobs), lim, err, batch)
	}
	return jobs
}
