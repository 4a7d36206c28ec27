// asynqbench measures hibiken/asynq on a given Redis, printing one JSON line per run in the
// shape of `jobs bench --json` (DESIGN.md, "Benchmark contract"), so that bench/compare-peers
// can put the two side by side.
//
//	go run . -mode process -n 30000 -c 100 -payload 100 -redis 127.0.0.1:6379
//
// It FLUSHDBs the given Redis first: point it at a throwaway redis-server.
//
// What each mode does (as `jobs bench` does, see internal/bench):
//
//	enqueue   one warm-up Enqueue, then N Enqueue calls from C goroutines; p50/p99/max are
//	          of each call
//	process   N jobs enqueued first from 50 goroutines (untimed; asynq has no batch
//	          enqueue), then a Server of Concurrency C with a no-op handler, timed from
//	          Run until the N-th handler call returned; p50/p99/max are of each handler
//	          start minus the server's start
//	latency   a Server of Concurrency C, given 2 s to start, then one job at a time, 20 ms
//	          apart: Enqueue call start to handler start
//	delay     a waiting Server, N jobs enqueued with ProcessAt 1-2.9 s ahead (100 ms
//	          steps): handler start minus due time
//	memory    N Enqueue calls from C goroutines, left pending: Redis used_memory growth / N
//
// Configuration: asynq's defaults apart from Concurrency. Among them: the server polls its
// queues (a worker's dequeue, when it finds nothing, sleeps 1 s before trying again:
// asynq's processor), and its forwarder moves scheduled jobs to pending every 5 s
// (DelayedTaskCheckInterval), which is where its pickup and delayed-job figures come from.
// A finished job is deleted at once (no Retention), as `jobs bench` does. Completion of a
// process run is the last handler's return, not its acknowledgement (asynq offers no
// hook after the job is marked done), which favours asynq slightly.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/bench/peers/harness"
)

const (
	jobType      = "bench"
	latencyIdle  = 20 * time.Millisecond
	serverStart  = 2 * time.Second
	stallTimeout = 30 * time.Second
	// prefillers is how many goroutines enqueue process mode's jobs before it is timed.
	prefillers = 50
)

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "Redis address (host:port); FLUSHDBed first")
	mode := flag.String("mode", "process", "enqueue|process|latency|delay|memory")
	n := flag.Int("n", 20000, "jobs (latency: samples)")
	c := flag.Int("c", 10, "concurrency: enqueuing goroutines, or the server's Concurrency")
	payload := flag.Int("payload", 100, "payload bytes")
	flag.Parse()
	if !slices.Contains([]string{"enqueue", "process", "latency", "delay", "memory"}, *mode) {
		usage("unknown mode %q (asynq has no batch enqueue)", *mode)
	}
	if *n <= 0 || *c <= 0 || *payload < 0 || flag.NArg() > 0 {
		usage("-n and -c must be positive, -payload not negative, and nothing follows the flags")
	}
	ctx := context.Background()
	b := &bench{opt: asynq.RedisClientOpt{Addr: *addr}, n: *n, c: *c,
		body: []byte(strings.Repeat("x", *payload))}
	b.rdb = redis.NewClient(&redis.Options{Addr: *addr})
	defer b.rdb.Close()
	if err := b.rdb.FlushDB(ctx).Err(); err != nil {
		fail(fmt.Errorf("FLUSHDB on %s: %w", *addr, err))
	}
	b.cl = asynq.NewClient(b.opt)
	defer b.cl.Close()
	out, err := b.run(ctx, *mode)
	if err != nil {
		fail(err)
	}
	out.System, out.Mode, out.N, out.C = "asynq", *mode, *n, *c
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

func usage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "asynqbench: "+format+"\n", args...)
	fmt.Fprintln(os.Stderr, "usage: asynqbench -mode enqueue|process|latency|delay|memory -n N -c C -payload BYTES -redis HOST:PORT")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "asynqbench:", err)
	os.Exit(1)
}

// bench is one run.
type bench struct {
	opt  asynq.RedisClientOpt
	rdb  *redis.Client
	cl   *asynq.Client
	n, c int
	body []byte
}

func (b *bench) run(ctx context.Context, mode string) (harness.Record, error) {
	switch mode {
	case "enqueue":
		return b.enqueue(ctx)
	case "process":
		return b.process(ctx)
	case "latency":
		return b.latency(ctx)
	case "delay":
		return b.delay(ctx)
	default:
		return b.memory(ctx)
	}
}

func (b *bench) enqueue(ctx context.Context) (harness.Record, error) {
	if _, err := b.cl.EnqueueContext(ctx, asynq.NewTask(jobType, b.body)); err != nil {
		return harness.Record{}, fmt.Errorf("warm-up enqueue: %w", err)
	}
	return b.enqueueTimed(ctx)
}

// enqueueTimed times N Enqueue calls from C goroutines: jobs_per_s, and the percentiles
// of each call's duration.
func (b *bench) enqueueTimed(ctx context.Context) (harness.Record, error) {
	took := make([]time.Duration, b.n)
	start := time.Now()
	err := harness.Parallel(b.c, b.n, func(i int) error {
		t0 := time.Now()
		_, err := b.cl.EnqueueContext(ctx, asynq.NewTask(jobType, b.body))
		took[i] = time.Since(t0)
		return err
	})
	if err != nil {
		return harness.Record{}, fmt.Errorf("enqueue: %w", err)
	}
	return harness.Summary(b.n, time.Since(start), took), nil
}

// server starts an asynq server of concurrency c whose handler calls fn with the job and
// the time it started; stop shuts it down (waiting for running handlers).
func (b *bench) server(fn func(t *asynq.Task, at time.Time)) (stop func(), err error) {
	srv := asynq.NewServer(b.opt, asynq.Config{Concurrency: b.c, LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc(jobType, func(_ context.Context, t *asynq.Task) error {
		fn(t, time.Now())
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	return srv.Shutdown, nil
}

func (b *bench) process(ctx context.Context) (harness.Record, error) {
	err := harness.Parallel(prefillers, b.n, func(int) error {
		_, err := b.cl.EnqueueContext(ctx, asynq.NewTask(jobType, b.body))
		return err
	})
	if err != nil {
		return harness.Record{}, fmt.Errorf("enqueue: %w", err)
	}
	var (
		started atomic.Int64
		ended   atomic.Int64
		start   time.Time
		took    = make([]time.Duration, b.n)
		all     = make(chan struct{})
	)
	start = time.Now()
	stop, err := b.server(func(_ *asynq.Task, at time.Time) {
		if i := started.Add(1) - 1; i < int64(b.n) {
			took[i] = at.Sub(start)
		}
		// The handler returns right after: its return is as close to the job's end as
		// asynq lets a harness see.
		if ended.Add(1) == int64(b.n) {
			close(all)
		}
	})
	if err != nil {
		return harness.Record{}, err
	}
	err = waitFor(all, ended.Load)
	elapsed := time.Since(start)
	stop()
	if err != nil {
		return harness.Record{}, err
	}
	return harness.Summary(b.n, elapsed, took), nil
}

func (b *bench) latency(ctx context.Context) (harness.Record, error) {
	starts := make(chan time.Time, 64)
	stop, err := b.server(func(_ *asynq.Task, at time.Time) {
		select {
		case starts <- at:
		default:
		}
	})
	if err != nil {
		return harness.Record{}, err
	}
	defer stop()
	time.Sleep(serverStart) // asynq's server has no ready signal
	took := make([]time.Duration, 0, b.n)
	for range b.n {
		time.Sleep(latencyIdle)
		t0 := time.Now()
		if _, err := b.cl.EnqueueContext(ctx, asynq.NewTask(jobType, nil)); err != nil {
			return harness.Record{}, fmt.Errorf("enqueue: %w", err)
		}
		select {
		case at := <-starts:
			took = append(took, at.Sub(t0))
		case <-time.After(stallTimeout):
			return harness.Record{}, fmt.Errorf("a job did not start within %s", stallTimeout)
		}
	}
	return harness.Summary(0, 0, took), nil
}

func (b *bench) delay(ctx context.Context) (harness.Record, error) {
	var (
		mu   sync.Mutex
		late = make([]time.Duration, 0, b.n)
		all  = make(chan struct{})
		seen atomic.Int64
	)
	stop, err := b.server(func(t *asynq.Task, at time.Time) {
		due, err := strconv.ParseInt(string(t.Payload()), 10, 64)
		if err != nil {
			return // not a job of this run's (the payload is its due time)
		}
		mu.Lock()
		late = append(late, at.Sub(time.Unix(0, due)))
		mu.Unlock()
		if seen.Add(1) == int64(b.n) {
			close(all)
		}
	})
	if err != nil {
		return harness.Record{}, err
	}
	defer stop()
	for i := range b.n {
		due := time.Now().Add(time.Second + time.Duration(i%20)*100*time.Millisecond)
		task := asynq.NewTask(jobType, []byte(strconv.FormatInt(due.UnixNano(), 10)))
		if _, err := b.cl.EnqueueContext(ctx, task, asynq.ProcessAt(due)); err != nil {
			return harness.Record{}, fmt.Errorf("enqueue: %w", err)
		}
	}
	if err := waitFor(all, seen.Load); err != nil {
		return harness.Record{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	return harness.Summary(0, 0, late), nil
}

func (b *bench) memory(ctx context.Context) (harness.Record, error) {
	before, err := usedMemory(ctx, b.rdb)
	if err != nil {
		return harness.Record{}, err
	}
	out, err := b.enqueueTimed(ctx)
	if err != nil {
		return harness.Record{}, err
	}
	after, err := usedMemory(ctx, b.rdb)
	if err != nil {
		return harness.Record{}, err
	}
	out.BytesPerJob = math.Round(float64(after-before)/float64(b.n)*10) / 10
	return out, nil
}

// waitFor waits until done is closed; it fails when progress has not moved for
// stallTimeout (the server is stuck, and a benchmark should say so rather than hang).
func waitFor(done <-chan struct{}, progress func() int64) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, moved := progress(), time.Now()
	for {
		select {
		case <-done:
			return nil
		case <-t.C:
		}
		if p := progress(); p != last {
			last, moved = p, time.Now()
		} else if time.Since(moved) > stallTimeout {
			return fmt.Errorf("no job ran for %s (%d done)", stallTimeout, p)
		}
	}
}

func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO memory: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO memory has no used_memory field")
}
