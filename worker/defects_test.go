package worker

// Reproduced defects of the worker (issue 12), one test each: every one failed on the
// worker before its one-owner loop.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// logCounter counts the log records (one Write each) that contain one of needles
// ("a|b").
type logCounter struct {
	needle string
	n      atomic.Int32
	t      *testing.T
}

func (l *logCounter) Write(p []byte) (int, error) {
	for _, n := range strings.Split(l.needle, "|") {
		if strings.Contains(string(p), n) {
			l.n.Add(1)
			break
		}
	}
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func countingLogger(t *testing.T, needle string) (*slog.Logger, *logCounter) {
	lc := &logCounter{needle: needle, t: t}
	return slog.New(slog.NewTextHandler(lc, &slog.HandlerOptions{Level: slog.LevelDebug})), lc
}

func noop(context.Context, *queue.Job) error { return nil }

// A worker whose claims or maintenance fail on one queue (its cluster master is down)
// keeps running the others' jobs promptly: the failing queue backs off alone.
func TestFailingQueueBacksOffAlone(t *testing.T) {
	if testing.Short() || redistest.ClusterMode() {
		t.Skip("starts its own cluster")
	}
	t.Parallel()
	cl, err := redistest.StartCluster(3, "--cluster-require-full-coverage", "no")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	rdb := cl.Client(t)
	// One queue per master.
	nodeOf := map[string]string{}
	//lint:ignore SA1019 CLUSTER SLOTS answers on Redis 6 too; CLUSTER SHARDS needs Redis 7
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byNode := map[string]bool{}
	for i := 0; len(names) < 3 && i < 1000; i++ {
		q := fmt.Sprintf("q%d", i)
		slot, err := rdb.ClusterKeySlot(ctx, "{"+q+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && !byNode[s.Nodes[0].Addr] {
				byNode[s.Nodes[0].Addr] = true
				nodeOf[q] = s.Nodes[0].Addr
				names = append(names, q)
			}
		}
	}
	down, up := names[0], names[1:]
	c, err := queue.NewClient(rdb, queue.Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan time.Time, 100)
	startWorker(t, c, Config{Queues: map[string]int{names[0]: 1, names[1]: 1, names[2]: 1},
		Handler: HandlerFunc(func(context.Context, *queue.Job) error { started <- time.Now(); return nil })})
	for _, q := range names { // every queue known to the client and the worker
		waitState(t, c, q, enqueue(t, c, "warm", "", queue.On(q)), queue.StateDone, 10*time.Second)
		<-started
	}
	for _, s := range cl.Servers {
		if s.Addr == nodeOf[down] {
			s.Kill()
		}
	}
	time.Sleep(300 * time.Millisecond) // the worker meets the dead master
	var ids [][2]string
	for i := range 20 {
		q := up[i%2]
		ids = append(ids, [2]string{q, enqueue(t, c, "x", "", queue.On(q))})
	}
	for _, p := range ids {
		waitState(t, c, p[0], p[1], queue.StateDone, 5*time.Second)
	}
	for range 20 {
		<-started
	}
	// Pickup on a healthy queue stays prompt while the other keeps failing.
	var lat []time.Duration
	for i := range 5 {
		time.Sleep(150 * time.Millisecond) // idle again
		sent := time.Now()
		enqueue(t, c, "x", "", queue.On(up[i%2]))
		select {
		case at := <-started:
			lat = append(lat, at.Sub(sent))
		case <-time.After(5 * time.Second):
			t.Fatal("a job on a healthy queue did not start within 5s")
		}
	}
	slices.Sort(lat)
	if lat[2] > 250*time.Millisecond {
		t.Errorf("pickup on the healthy queues %v, median %s: want well under 250ms", lat, lat[2])
	}
}

// A worker cut off from Redis cancels a handler before its lease can expire, whatever
// Redis does (here: a network that swallows everything, and no read timeout).
func TestWatchdogCancelsHandlerBeforeLeaseExpires(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	p := redistest.NewProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	prefix := redistest.Prefix(t)
	c, err := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	direct, _ := queue.NewClient(srv.Client(t), queue.Config{Prefix: prefix})
	const lease = 1200 * time.Millisecond
	startedc := make(chan struct{})
	ended := make(chan error, 1)
	startWorker(t, c, Config{Lease: lease, ShutdownTimeout: 100 * time.Millisecond, AbandonGrace: 100 * time.Millisecond,
		Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			close(startedc)
			<-ctx.Done()
			ended <- context.Cause(ctx)
			return ctx.Err()
		})})
	id := enqueue(t, direct, "x", "")
	<-startedc
	j, err := direct.Get(ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	p.Stall()
	stalled := time.Now()
	select {
	case cause := <-ended:
		// The lease was renewed at the latest just before the stall: it cannot expire in
		// Redis before stalled + lease, nor (Redis's clock) before the claim + lease.
		if took := time.Since(stalled); took >= lease {
			t.Errorf("handler cancelled %s after the stall, at or past the %s lease", took, lease)
		}
		if !errors.Is(cause, ErrLeaseExpiring) {
			t.Errorf("cause %v, want ErrLeaseExpiring", cause)
		}
	case <-time.After(3 * lease):
		t.Fatalf("handler still running %s after the network stalled (claimed at %s)", 3*lease, j.StartedAt)
	}
	p.Resume()
}

// An exclusive job's lock is held until its handler returns, even when the worker
// abandoned that handler: the next job of the key never runs beside it.
func TestExclusiveLockHeldUntilAbandonedHandlerReturns(t *testing.T) {
	t.Parallel()
	// A grace far shorter than the job's timeout once raced the release of the lock with
	// the abandon (a negative WaitGroup count, or the lock kept forever).
	for _, grace := range []time.Duration{time.Millisecond, 100 * time.Millisecond} {
		t.Run(fmt.Sprint("grace ", grace), func(t *testing.T) {
			t.Parallel()
			exclusiveLockHeldUntilAbandonedHandlerReturns(t, grace)
		})
	}
}

func exclusiveLockHeldUntilAbandonedHandlerReturns(t *testing.T, grace time.Duration) {
	c := newClient(t)
	release := make(chan struct{})
	var running, peak atomic.Int32
	var secondRan atomic.Bool
	h := HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		n := running.Add(1)
		defer running.Add(-1)
		if n > peak.Load() {
			peak.Store(n)
		}
		if string(j.Payload) == "stuck" {
			<-release // ignores its context
			return nil
		}
		secondRan.Store(true)
		return nil
	})
	startWorker(t, c, Config{Concurrency: 4, AbandonGrace: grace, Handler: h})
	first := enqueue(t, c, "report", "stuck", queue.Exclusive("k"), queue.Timeout(100*time.Millisecond), queue.MaxRetry(0))
	waitState(t, c, "default", first, queue.StateDead, 5*time.Second) // abandoned
	second := enqueue(t, c, "report", "next", queue.Exclusive("k"))
	time.Sleep(1500 * time.Millisecond) // more than one ExclusiveRetryDelay
	if secondRan.Load() {
		t.Fatal("the second job of key k ran while the abandoned handler of the first still held it")
	}
	close(release)
	waitState(t, c, "default", second, queue.StateDone, 10*time.Second)
	if peak.Load() != 1 {
		t.Errorf("%d handlers of key k ran at once, want 1", peak.Load())
	}
}

// A second Run of a Worker while one is in progress is refused; a Run after the first
// returned works.
func TestRunRefusesASecondConcurrentRun(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var calls atomic.Int32
	var started atomic.Bool
	draining := make(chan struct{})
	w, err := New(c, Config{Handler: HandlerFunc(func(_ context.Context, j *queue.Job) error {
		calls.Add(1)
		if j.Type == "slow" {
			started.Store(true)
			<-draining // ignores its context: the first Run drains until it returns
		}
		return nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(ctx)
	done1 := make(chan error, 1)
	go func() { done1 <- w.Run(ctx1) }()
	time.Sleep(50 * time.Millisecond)
	second := make(chan error, 1)
	go func() { second <- w.Run(ctx) }()
	select {
	case err := <-second:
		if !errors.Is(err, ErrRunning) {
			t.Errorf("second Run() err = %v, want ErrRunning", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("second concurrent Run() did not return")
	}
	// While the first Run drains (its context ended, a job still running), a new Run is
	// refused too: the two would claim for one worker ID.
	slow := enqueue(t, c, "slow", "")
	waitState(t, c, "default", slow, queue.StateActive, 5*time.Second)
	eventually(t, 5*time.Second, "slow job started", func() bool { return started.Load() })
	cancel1()
	go func() { second <- w.Run(ctx) }()
	select {
	case err := <-second:
		if !errors.Is(err, ErrRunning) {
			t.Errorf("Run() while the first drains err = %v, want ErrRunning", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run() while the first drains did not return")
	}
	close(draining)
	if err := <-done1; err != nil {
		t.Fatalf("first Run() = %v", err)
	}
	waitState(t, c, "default", slow, queue.StateDone, 5*time.Second)
	calls.Add(-1)
	ctx2, cancel2 := context.WithCancel(ctx)
	done2 := make(chan error, 1)
	go func() { done2 <- w.Run(ctx2) }()
	var ids []string
	for range 20 {
		ids = append(ids, enqueue(t, c, "x", ""))
	}
	for _, id := range ids {
		waitState(t, c, "default", id, queue.StateDone, 5*time.Second)
	}
	cancel2()
	<-done2
	if n := calls.Load(); n != 20 {
		t.Errorf("%d handler calls for 20 jobs", n)
	}
}

// A cancelled job ends dead on every path, and a running handler hears of the cancel
// within a second, not at the next heartbeat.
func TestCancelledJobEndsDeadOnEveryPath(t *testing.T) {
	t.Parallel()
	t.Run("handler returns nil after the cancel", func(t *testing.T) {
		t.Parallel()
		c := newClient(t)
		started, release := make(chan struct{}), make(chan struct{})
		startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			close(started)
			<-release // ignores its context, then succeeds
			return nil
		})})
		id := enqueue(t, c, "x", "")
		<-started
		if _, err := c.Cancel(ctx, "default", id); err != nil {
			t.Fatal(err)
		}
		close(release)
		if j := waitState(t, c, "default", id, queue.StateDead, 5*time.Second); !strings.Contains(j.LastError, "cancelled by operator") {
			t.Errorf("last_error %q", j.LastError)
		}
	})
	t.Run("buffered behind a running job", func(t *testing.T) {
		t.Parallel()
		c := newClient(t)
		h, started, release := blockAfterFast()
		var ran sync.Map
		startWorker(t, c, Config{Concurrency: 1, Lease: time.Minute, Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			ran.Store(j.ID, true)
			return h.Process(ctx, j)
		})})
		warm(t, c)
		block, fast := enqueueBlockThenFast(t, c, 5)
		<-started
		if j, _ := c.Get(ctx, "default", fast[0]); j.State != queue.StateActive {
			t.Fatalf("fast job %s, want active (claimed ahead)", j.State)
		}
		if _, err := c.Cancel(ctx, "default", fast[0]); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, "default", fast[0], queue.StateDead, time.Second)
		close(release)
		waitState(t, c, "default", block, queue.StateDone, 5*time.Second)
		for _, id := range fast[1:] {
			waitState(t, c, "default", id, queue.StateDone, 5*time.Second)
		}
		if _, ok := ran.Load(fast[0]); ok {
			t.Error("the cancelled buffered job ran")
		}
	})
	t.Run("running handler cancelled within 1s", func(t *testing.T) {
		t.Parallel()
		c := newClient(t)
		started := make(chan struct{})
		ended := make(chan error, 1)
		startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			close(started)
			<-ctx.Done()
			ended <- context.Cause(ctx)
			return ctx.Err()
		})})
		id := enqueue(t, c, "x", "")
		<-started
		time.Sleep(100 * time.Millisecond) // the worker's subscription is up by now
		sent := time.Now()
		if _, err := c.Cancel(ctx, "default", id); err != nil {
			t.Fatal(err)
		}
		select {
		case cause := <-ended:
			if took := time.Since(sent); took > time.Second || !errors.Is(cause, ErrCancelled) {
				t.Errorf("handler cancelled after %s with cause %v; want within 1s, cancelled by operator", took, cause)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("handler not cancelled within 5s of the cancel")
		}
		waitState(t, c, "default", id, queue.StateDead, 5*time.Second)
	})
}

// One worker running 5,000 jobs of one queue renews all their leases: none is lost.
func TestFiveThousandRunningJobsKeepTheirLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 jobs")
	}
	t.Parallel()
	c := newClient(t)
	const n = 5000
	var running atomic.Int32
	all := make(chan struct{})
	logger, lost := countingLogger(t, "level=WARN|level=ERROR")
	// A lease long enough that a loaded machine under -race renews 5,000 leases within
	// its heartbeat timeout (a quarter of it); the batches are what this tests.
	startWorker(t, c, Config{Concurrency: n, Lease: 3 * time.Second, Logger: logger,
		Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			if running.Add(1) == n {
				close(all)
			}
			select {
			case <-all:
			case <-ctx.Done():
				return ctx.Err()
			}
			select { // several heartbeats (every second) while all 5,000 run
			case <-time.After(3500 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})})
	var ids []string
	for k := 0; k < n; k += 1000 {
		batch := make([]queue.BatchJob, 1000)
		for i := range batch {
			batch[i] = queue.BatchJob{Type: "x"}
		}
		res, err := c.EnqueueBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	for _, id := range ids {
		if j := waitState(t, c, "default", id, queue.StateDone, 30*time.Second); j.Attempt != 1 {
			t.Fatalf("job %s done at attempt %d, want 1", id, j.Attempt)
		}
	}
	if lost.n.Load() > 0 {
		t.Errorf("%d warnings or errors logged, want none", lost.n.Load())
	}
}

// A BackoffFunc that returns a negative duration retries at once; it never dead-letters.
func TestNegativeBackoffRetriesAtOnce(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	startWorker(t, c, Config{BackoffFunc: func(*queue.Job, error) time.Duration { return -time.Second },
		Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			if j.Attempt == 1 {
				return errors.New("first try fails")
			}
			return nil
		})})
	id := enqueue(t, c, "x", "")
	if j := waitState(t, c, "default", id, queue.StateDone, 5*time.Second); j.Attempt != 2 {
		t.Errorf("attempt %d, want 2", j.Attempt)
	}
}

// A handler that calls runtime.Goexit (as t.FailNow does) fails its attempt at once and
// frees its slot: it is not held for AbandonGrace as a handler that never returned.
func TestGoexitFailsTheAttemptAndFreesTheSlot(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	logger, abandoned := countingLogger(t, "abandon")
	startWorker(t, c, Config{Concurrency: 1, AbandonGrace: 5 * time.Second, Logger: logger,
		Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			if j.Type == "goexit" {
				runtime.Goexit()
			}
			return nil
		})})
	bad := enqueue(t, c, "goexit", "", queue.MaxRetry(0))
	next := enqueue(t, c, "fine", "")
	if j := waitState(t, c, "default", bad, queue.StateDead, time.Second); !strings.Contains(j.LastError, "Goexit") {
		t.Errorf("last_error %q, want it to name runtime.Goexit", j.LastError)
	}
	waitState(t, c, "default", next, queue.StateDone, time.Second)
	if abandoned.n.Load() > 0 {
		t.Error("the Goexit handler was treated as abandoned")
	}
}

// An idle worker whose client has a read timeout shorter than the blocking wait neither
// logs failed waits nor redials.
func TestShortReadTimeoutIdleWorker(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	c, err := queue.NewClient(rdb, queue.Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	logger, failures := countingLogger(t, "failed")
	stop := startWorker(t, c, Config{Logger: logger, Handler: HandlerFunc(noop)})
	waitState(t, c, "default", enqueue(t, c, "x", ""), queue.StateDone, 5*time.Second)
	time.Sleep(2500 * time.Millisecond)
	waitState(t, c, "default", enqueue(t, c, "x", ""), queue.StateDone, 5*time.Second)
	stop()
	if n := failures.n.Load(); n > 0 {
		t.Errorf("%d failures logged by an idle worker", n)
	}
	if st := rdb.PoolStats(); st.Misses > 6 {
		t.Errorf("%d connections dialled (%+v), want a handful: waits must not drop theirs", st.Misses, st)
	}
}

// Two workers with different handlers on one queue: no job dies because the worker that
// claimed it lacks its handler; each runs once, at its first attempt.
func TestWorkersWithDifferentHandlersShareAQueue(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	resizeOnly, both := NewMux(), NewMux()
	resizeOnly.HandleFunc("resize", noop)
	both.HandleFunc("resize", noop)
	both.HandleFunc("email", noop)
	var log lockedBuffer // what the worker without the email handler says
	startWorker(t, c, Config{Handler: resizeOnly, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	startWorker(t, c, Config{Handler: both})
	var ids []string
	for i := range 40 {
		typ := "resize"
		if i%3 == 0 {
			typ = "email"
		}
		ids = append(ids, enqueue(t, c, typ, "", queue.MaxRetry(1)))
	}
	for _, id := range ids {
		if j := waitState(t, c, "default", id, queue.StateDone, 15*time.Second); j.Attempt != 1 {
			t.Errorf("job %s (%s) done at attempt %d, want 1", id, j.Type, j.Attempt)
		}
	}
	// A type no worker handles waits, uncounted, saying why. It keeps meeting workers that
	// claim and postpone it, so a reading may catch it active (its attempt taken for the
	// claim); what must hold is that it never dies and, between claims, waits at attempt 0.
	orphan := enqueue(t, c, "nobody", "", queue.MaxRetry(0))
	var last *queue.Job
	waiting := 0
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		j, err := c.Get(ctx, "default", orphan)
		if err != nil || j.State == queue.StateDead {
			t.Fatalf("orphan job = %+v, %v; want it waiting for a worker with its handler", j, err)
		}
		if j.State == queue.StateActive {
			continue
		}
		last = j
		if j.Attempt != 0 {
			t.Fatalf("orphan job = %+v; want attempt 0 between claims", j)
		}
		if strings.Contains(j.LastError, `no handler for job type "nobody"`) {
			waiting++
		}
	}
	if waiting == 0 {
		t.Errorf("orphan job never seen waiting with last_error naming the missing handler; last reading %+v", last)
	}
	// The operator of the worker without a handler is told, once a minute per type.
	log.mu.Lock()
	defer log.mu.Unlock()
	warned := 0
	for line := range strings.Lines(log.buf.String()) {
		if strings.Contains(line, `"msg":"job postponed"`) && !strings.Contains(line, `"level":"DEBUG"`) {
			t.Errorf("a postponement for want of a handler logged above Debug (the warning once a minute says it): %s", line)
		}
		if strings.Contains(line, `"level":"WARN","msg":"no handler for a job type here`) {
			warned++
			if !strings.Contains(line, `"job_type":"email"`) && !strings.Contains(line, `"job_type":"nobody"`) {
				t.Errorf("no-handler warning names no job type: %s", line)
			}
		}
	}
	if warned == 0 || warned > 2 {
		t.Errorf("%d no-handler warnings from the worker without the email handler, want one per type (email, perhaps nobody): %s", warned, log.buf.String())
	}
}

// The handler gets a copy of the job, without the worker's lease token: what it changes
// does not reach the worker.
func TestHandlerGetsACopyOfTheJob(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	leases := make(chan string, 1)
	startWorker(t, c, Config{Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		leases <- j.Lease
		j.Lease, j.ID, j.Queue = "forged", "other", "elsewhere"
		return nil
	})})
	id := enqueue(t, c, "x", "")
	waitState(t, c, "default", id, queue.StateDone, 5*time.Second)
	if l := <-leases; l != "" {
		t.Errorf("handler saw lease %q, want none", l)
	}
}

// At concurrency 1, ready jobs start in the order they were enqueued, and so do jobs
// due at the same instant (one client's).
func TestJobsStartInQueueOrder(t *testing.T) {
	t.Parallel()
	for _, due := range []bool{false, true} {
		t.Run(fmt.Sprintf("due at one instant %v", due), func(t *testing.T) {
			t.Parallel()
			c := newClient(t)
			var mu sync.Mutex
			var order []string
			startWorker(t, c, Config{Concurrency: 1, Handler: HandlerFunc(func(ctx context.Context, j *queue.Job) error {
				mu.Lock()
				order = append(order, string(j.Payload))
				mu.Unlock()
				return nil
			})})
			// Far enough ahead that all 200 are scheduled before it passes, even on a
			// loaded machine under -race (one enqueued after it would be ready at once).
			at := time.Now().Add(5 * time.Second)
			var want, ids []string
			for i := range 200 {
				opts := []queue.Option{}
				if due {
					opts = append(opts, queue.At(at))
				}
				want = append(want, fmt.Sprint(i))
				ids = append(ids, enqueue(t, c, "x", fmt.Sprint(i), opts...))
			}
			if due && time.Now().After(at) {
				t.Skip("enqueueing 200 jobs took longer than 5s: cannot test their order at one instant")
			}
			for _, id := range ids {
				waitState(t, c, "default", id, queue.StateDone, 15*time.Second)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(order, want) {
				out := 0
				for i := range order {
					if order[i] != want[i] {
						out++
					}
				}
				t.Errorf("%d of 200 jobs started out of enqueue order: %v", out, order)
			}
		})
	}
}

// Exclusive jobs on a full Redis (noeviction), whose locks' SET NX it refuses with OOM:
// each is postponed at Debug, with one warning a minute for the worker, and all of them
// run once Redis takes writes again. Before, every refusal was an Info line: 50 jobs made
// 50 a second.
func TestExclusiveJobsOnAFullRedis(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("starts its own single redis-server")
	}
	t.Parallel()
	srv := redistest.Own(t)
	rdb := srv.Client(t)
	c, _ := clientWithPrefix(t, rdb)
	const n = 50
	for i := range n {
		enqueue(t, c, "x", "", queue.Exclusive(fmt.Sprintf("k%d", i)))
	}
	used := rdb.Info(ctx, "memory").Val()
	_, used, _ = strings.Cut(used, "used_memory:")
	used, _, _ = strings.Cut(used, "\r\n")
	mem, err := strconv.Atoi(used)
	if err != nil {
		t.Fatalf("used_memory %q: %v", used, err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.Itoa(mem-4096)).Err(); err != nil {
		t.Fatal(err)
	}
	postponed := &logCounter{needle: `level=INFO msg="job postponed"`, t: t}
	warned := &logCounter{needle: "cannot take exclusive locks", t: t}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(postponed, warned), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var ran atomic.Int32
	startWorker(t, c, Config{Concurrency: 4, Logger: log, Handler: HandlerFunc(func(context.Context, *queue.Job) error {
		ran.Add(1)
		return nil
	})})
	time.Sleep(3 * time.Second)
	if got := ran.Load(); got != 0 {
		t.Fatalf("%d exclusive jobs ran on a full Redis, want none: it refuses their locks", got)
	}
	if got := postponed.n.Load(); got != 0 {
		t.Errorf("%d Info lines 'job postponed' in 3s, want the refusals at Debug", got)
	}
	if got := warned.n.Load(); got != 1 {
		t.Errorf("%d warnings that locks cannot be taken in 3s, want 1", got)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for ran.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d exclusive jobs ran within 15s of Redis taking writes again", ran.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
