// riverbench measures riverqueue/river (Postgres, driver riverpgxv5) on a given PostgreSQL,
// printing one JSON line per run in the same shape as `jobs bench` and ../asynq, so they
// can be compared side by side in one run (bench/compare-peers).
//
//	go run . -mode process -n 20000 -c 10 -payload 100 -pg postgres://postgres@127.0.0.1:5432/postgres
//
// It migrates the database up (rivermigrate) and TRUNCATEs River's tables first, as
// ../asynq FLUSHDBs its Redis: point it at a throwaway database.
//
// What each mode does (as `jobs bench` does, see internal/bench in the project):
//
//	enqueue        one warm-up Insert, then N Insert calls from C goroutines; p50/p99/max
//	               are of each call (each one is its own transaction: BEGIN, INSERT, COMMIT)
//	enqueue-batch  one warm-up Insert, then N jobs by InsertMany of 1000 from C goroutines;
//	               p50/p99/max are of each InsertMany call
//	process        N jobs pre-inserted by InsertMany of 1000 (untimed), then a client with
//	               MaxWorkers C and a no-op worker, timed from client.Start until N
//	               EventKindJobCompleted events (sent once the completer has written the
//	               job completed, so "acked"; River's own benchmark counts the same way);
//	               p50/p99/max are of each worker start minus client start
//	latency        started client, warm-up job, then one job at a time, 20 ms apart: Insert
//	               call start to worker start
//	delay          started client, N jobs inserted by 50 InsertMany calls spread evenly over
//	               5 s (River's scheduler cycle, see delay()), each job with ScheduledAt
//	               uniformly 1-3 s after its insert: worker start minus ScheduledAt
//	memory         warm-up Insert, then N jobs by InsertMany of 1000 from C goroutines, left
//	               available: growth of pg_total_relation_size('river_job') (heap, TOAST and
//	               every index; on-disk pages, not RAM) / N
//
// Fetch settings: River's defaults are FetchCooldown 100 ms and FetchPollInterval 1 s. This
// harness sets FetchCooldown 2 ms and FetchPollInterval 20 ms, as River's own benchmark
// (cmd/river/riverbench) does to maximise throughput; -default-fetch keeps River's
// defaults. Completed jobs stay in river_job (River's JobCleaner deletes them after 24 h by
// default); that is River's normal behaviour, not changed here. The job scheduler that makes
// scheduled jobs available runs every 5 s on the leader (not configurable in River), with
// a 5 s look-ahead.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/jobs-dev/jobs/bench/peers/harness"
)

const (
	batchSize    = 1000
	latencyIdle  = 20 * time.Millisecond
	stallTimeout = 30 * time.Second

	// schedulerCycle is how often River's scheduler makes scheduled jobs available
	// (maintenance.JobSchedulerIntervalDefault, not configurable); delay mode spreads its
	// inserts over one cycle in delayGroups calls.
	schedulerCycle = 5 * time.Second
	delayGroups    = 50
)

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// benchArgs is every job's args: P is the payload ("x" * -payload), W marks the warm-up job.
type benchArgs struct {
	P string `json:"p,omitempty"`
	W bool   `json:"w,omitempty"`
}

func (benchArgs) Kind() string { return "bench" }

type bench struct {
	pool    *pgxpool.Pool
	driver  *riverpgxv5.Driver
	mode    string
	n, c    int
	payload string
	fast    bool
	fetch   bool // River's own benchmark's fetch settings, not River's defaults
	logger  *slog.Logger
}

func main() {
	pgURL := flag.String("pg", "postgres://postgres@127.0.0.1:5432/postgres",
		"PostgreSQL URL; pgxpool's pool_max_conns=N sets the pool size (default max(4, CPUs), "+
			"which on 2 CPUs enqueued faster at c50 than 20 or 50 connections)")
	mode := flag.String("mode", "process", "enqueue|enqueue-batch|process|latency|delay|memory")
	n := flag.Int("n", 20000, "jobs")
	c := flag.Int("c", 10, "concurrency")
	payload := flag.Int("payload", 100, "payload bytes")
	defaultFetch := flag.Bool("default-fetch", false,
		"keep River's default FetchCooldown (100ms) and FetchPollInterval (1s) instead of riverbench's 2ms/20ms")
	fast := flag.Bool("fast", false, "insert batches with InsertManyFast (COPY FROM, returns no rows) instead of InsertMany")
	flag.Parse()
	if !slices.Contains([]string{"enqueue", "enqueue-batch", "process", "latency", "delay", "memory"}, *mode) {
		fmt.Fprintln(os.Stderr, "unknown mode", *mode)
		os.Exit(2)
	}
	if *n <= 0 || *c <= 0 || *payload < 0 {
		fmt.Fprintln(os.Stderr, "-n and -c must be positive, -payload not negative")
		os.Exit(2)
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, *pgURL)
	check(err)
	defer pool.Close()
	b := &bench{pool: pool, driver: riverpgxv5.New(pool), mode: *mode, n: *n, c: *c,
		payload: strings.Repeat("x", *payload), fast: *fast, fetch: !*defaultFetch,
		logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	check(b.setup(ctx))
	check(warmPool(ctx, pool, *c))
	out, err := b.run(ctx)
	check(err)
	out.System, out.Mode, out.N, out.C = "river", *mode, *n, *c
	check(json.NewEncoder(os.Stdout).Encode(out))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

// setup migrates River's schema up and empties its tables.
func (b *bench) setup(ctx context.Context) error {
	m, err := rivermigrate.New(b.driver, &rivermigrate.Config{Logger: b.logger})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("rivermigrate up: %w", err)
	}
	_, err = b.pool.Exec(ctx, "TRUNCATE river_job, river_leader, river_queue")
	return err
}

// warmPool opens up to c of the pool's connections before anything is timed: a Postgres
// connection is a forked backend, which an application's pool has long opened.
func warmPool(ctx context.Context, pool *pgxpool.Pool, c int) error {
	conns := make([]*pgxpool.Conn, 0, c)
	defer func() {
		for _, cn := range conns {
			cn.Release()
		}
	}()
	for range min(c, int(pool.Config().MaxConns)) {
		cn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, cn)
	}
	return nil
}

func (b *bench) run(ctx context.Context) (harness.Record, error) {
	switch b.mode {
	case "enqueue":
		return b.enqueue(ctx)
	case "enqueue-batch", "memory":
		return b.enqueueBatch(ctx)
	case "process":
		return b.process(ctx)
	case "latency":
		return b.latency(ctx)
	default:
		return b.delay(ctx)
	}
}

// client returns a River client; with work, it works the default queue with MaxWorkers c
// through w.
func (b *bench) client(work river.Worker[benchArgs], c int) (*river.Client[pgx.Tx], error) {
	cfg := &river.Config{Logger: b.logger}
	if b.fetch {
		cfg.FetchCooldown, cfg.FetchPollInterval = 2*time.Millisecond, 20*time.Millisecond
	}
	if work != nil {
		workers := river.NewWorkers()
		river.AddWorker(workers, work)
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c}}
	}
	return river.NewClient(b.driver, cfg)
}

// warmInserter returns a client that only inserts, after one warm-up Insert: the schema
// and the pool's connection are ready before anything is timed.
func (b *bench) warmInserter(ctx context.Context) (*river.Client[pgx.Tx], error) {
	cl, err := b.client(nil, 0)
	if err != nil {
		return nil, err
	}
	if _, err := cl.Insert(ctx, benchArgs{W: true}, nil); err != nil {
		return nil, err
	}
	return cl, nil
}

func (b *bench) enqueue(ctx context.Context) (harness.Record, error) {
	cl, err := b.warmInserter(ctx)
	if err != nil {
		return harness.Record{}, err
	}
	took := make([]time.Duration, b.n)
	start := time.Now()
	err = harness.Parallel(b.c, b.n, func(i int) error {
		t0 := time.Now()
		_, err := cl.Insert(ctx, benchArgs{P: b.payload}, nil)
		took[i] = time.Since(t0)
		return err
	})
	if err != nil {
		return harness.Record{}, err
	}
	return harness.Summary(b.n, time.Since(start), took), nil
}

func (b *bench) enqueueBatch(ctx context.Context) (harness.Record, error) {
	cl, err := b.warmInserter(ctx)
	if err != nil {
		return harness.Record{}, err
	}
	var before int64
	if b.mode == "memory" {
		if before, err = b.relationSize(ctx); err != nil {
			return harness.Record{}, err
		}
	}
	start := time.Now()
	took, err := b.insertBatches(ctx, cl, b.n, b.c, nil)
	if err != nil {
		return harness.Record{}, err
	}
	out := harness.Summary(b.n, time.Since(start), took)
	if b.mode == "memory" {
		after, err := b.relationSize(ctx)
		if err != nil {
			return harness.Record{}, err
		}
		out.BytesPerJob = math.Round(float64(after-before)/float64(b.n)*10) / 10
	}
	return out, nil
}

func (b *bench) relationSize(ctx context.Context) (int64, error) {
	var n int64
	err := b.pool.QueryRow(ctx, "SELECT pg_total_relation_size('river_job')").Scan(&n)
	return n, err
}

// insertBatches inserts n jobs by InsertMany (InsertManyFast with -fast) of batchSize from
// up to workers goroutines; opts, when not nil, gives each job's InsertOpts. It returns
// each call's duration.
func (b *bench) insertBatches(ctx context.Context, cl *river.Client[pgx.Tx], n, workers int,
	opts func() *river.InsertOpts) ([]time.Duration, error) {
	batches := (n + batchSize - 1) / batchSize
	took := make([]time.Duration, batches)
	err := harness.Parallel(workers, batches, func(k int) error {
		params := make([]river.InsertManyParams, min(batchSize, n-k*batchSize))
		for i := range params {
			params[i].Args = benchArgs{P: b.payload}
			if opts != nil {
				params[i].InsertOpts = opts()
			}
		}
		t0 := time.Now()
		var err error
		if b.fast {
			_, err = cl.InsertManyFast(ctx, params)
		} else {
			_, err = cl.InsertMany(ctx, params)
		}
		took[k] = time.Since(t0)
		return err
	})
	return took, err
}

func (b *bench) process(ctx context.Context) (harness.Record, error) {
	ins, err := b.client(nil, 0)
	if err != nil {
		return harness.Record{}, err
	}
	if _, err := b.insertBatches(ctx, ins, b.n, min(b.c, 16), nil); err != nil {
		return harness.Record{}, err
	}
	var (
		started atomic.Int64
		start   time.Time
		took    = make([]time.Duration, b.n)
	)
	cl, err := b.client(river.WorkFunc(func(ctx context.Context, j *river.Job[benchArgs]) error {
		at := time.Now()
		if i := started.Add(1) - 1; i < int64(b.n) {
			took[i] = at.Sub(start)
		}
		return nil
	}), b.c)
	if err != nil {
		return harness.Record{}, err
	}
	events, cancel := b.subscribe(cl)
	defer cancel()
	start = time.Now()
	if err := cl.Start(ctx); err != nil {
		return harness.Record{}, err
	}
	err = waitEvents(events, b.n, nil)
	elapsed := time.Since(start)
	if err = errors.Join(err, cl.Stop(ctx)); err != nil {
		return harness.Record{}, err
	}
	return harness.Summary(b.n, elapsed, took), nil
}

// subscribe returns cl's job completions, failures and cancellations, with room for every
// job of the run and more, so that River never drops one for a slow reader.
func (b *bench) subscribe(cl *river.Client[pgx.Tx]) (<-chan *river.Event, func()) {
	return cl.SubscribeConfig(&river.SubscribeConfig{ChanSize: b.n + 1000,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled}})
}

// waitEvents reads n completion events (a failed or cancelled job is an error), calling
// each, when not nil, with each one's job ID; it fails when none comes for stallTimeout.
func waitEvents(events <-chan *river.Event, n int, each func(id int64)) error {
	stall := time.NewTimer(stallTimeout)
	defer stall.Stop()
	for done := 0; done < n; done++ {
		select {
		case ev, ok := <-events:
			if !ok {
				return errors.New("subscription closed")
			}
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("job %d: event %s", ev.Job.ID, ev.Kind)
			}
			if each != nil {
				each(ev.Job.ID)
			}
			stall.Reset(stallTimeout)
		case <-stall.C:
			return fmt.Errorf("no job finished for %s (%d of %d)", stallTimeout, done, n)
		}
	}
	return nil
}

func (b *bench) latency(ctx context.Context) (harness.Record, error) {
	type startEvent struct {
		id int64
		at time.Time
	}
	starts := make(chan startEvent, 64)
	warm := make(chan struct{}, 1)
	cl, err := b.client(river.WorkFunc(func(ctx context.Context, j *river.Job[benchArgs]) error {
		at := time.Now()
		if j.Args.W {
			warm <- struct{}{}
			return nil
		}
		select {
		case starts <- startEvent{j.ID, at}:
		default:
		}
		return nil
	}), b.c)
	if err != nil {
		return harness.Record{}, err
	}
	defer cl.Stop(ctx)
	if err := startWarm(ctx, cl, warm); err != nil {
		return harness.Record{}, err
	}
	took := make([]time.Duration, 0, b.n)
	for range b.n {
		time.Sleep(latencyIdle)
		t0 := time.Now()
		res, err := cl.Insert(ctx, benchArgs{P: b.payload}, nil)
		if err != nil {
			return harness.Record{}, err
		}
		stall := time.After(stallTimeout)
	wait:
		for {
			select {
			case ev := <-starts:
				if ev.id == res.Job.ID {
					took = append(took, ev.at.Sub(t0))
					break wait
				}
			case <-stall:
				return harness.Record{}, fmt.Errorf("job %d did not start within %s", res.Job.ID, stallTimeout)
			}
		}
	}
	return harness.Summary(0, 0, took), cl.Stop(ctx)
}

func (b *bench) delay(ctx context.Context) (harness.Record, error) {
	var (
		mu   sync.Mutex
		late = make([]time.Duration, 0, b.n)
		warm = make(chan struct{}, 1)
	)
	cl, err := b.client(river.WorkFunc(func(ctx context.Context, j *river.Job[benchArgs]) error {
		at := time.Now()
		if j.Args.W {
			warm <- struct{}{}
			return nil
		}
		mu.Lock()
		late = append(late, at.Sub(j.ScheduledAt))
		mu.Unlock()
		return nil
	}), b.c)
	if err != nil {
		return harness.Record{}, err
	}
	events, cancel := b.subscribe(cl)
	defer cancel()
	defer cl.Stop(ctx)
	if err := startWarm(ctx, cl, warm); err != nil {
		return harness.Record{}, err
	}
	if err := waitEvents(events, 1, nil); err != nil { // the warm-up's completion
		return harness.Record{}, err
	}
	// River makes scheduled jobs available only when its scheduler runs (every 5 s, with a
	// 5 s look-ahead), so how late a job starts depends on when it was inserted in that
	// cycle: all N at once would give one phase per run (some runs ~20 ms, others seconds).
	// The jobs go in delayGroups InsertMany calls spread evenly over one cycle instead, so
	// each run samples every phase, as jobs inserted at arbitrary times would.
	groups := min(b.n, delayGroups)
	begin := time.Now()
	for g := range groups {
		time.Sleep(time.Until(begin.Add(time.Duration(g) * schedulerCycle / time.Duration(groups))))
		params := make([]river.InsertManyParams, b.n/groups+btoi(g < b.n%groups))
		for i := range params {
			params[i] = river.InsertManyParams{Args: benchArgs{P: b.payload},
				InsertOpts: &river.InsertOpts{ScheduledAt: time.Now().Add(time.Second + rand.N(2*time.Second))}}
		}
		if _, err := cl.InsertMany(ctx, params); err != nil {
			return harness.Record{}, err
		}
	}
	if err := waitEvents(events, b.n, nil); err != nil {
		return harness.Record{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	return harness.Summary(0, 0, late), cl.Stop(ctx)
}

// startWarm starts cl and waits until a warm-up job (W set) has run, which the worker
// reports on warm: nothing is timed before the client has fetched and worked once.
func startWarm(ctx context.Context, cl *river.Client[pgx.Tx], warm <-chan struct{}) error {
	if err := cl.Start(ctx); err != nil {
		return err
	}
	if _, err := cl.Insert(ctx, benchArgs{W: true}, nil); err != nil {
		return err
	}
	select {
	case <-warm:
		return nil
	case <-time.After(stallTimeout):
		return fmt.Errorf("the warm-up job did not run within %s", stallTimeout)
	}
}
