package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// clientWithPrefix is newClient that also returns the key prefix, for tests that read
// raw keys.
func clientWithPrefix(t *testing.T, rdb redis.UniversalClient) (*queue.Client, string) {
	t.Helper()
	p := redistest.Prefix(t)
	c, err := queue.NewClient(rdb, queue.Config{Prefix: p})
	if err != nil {
		t.Fatal(err)
	}
	return c, p
}

// Progress reported by a Go handler is visible within about a second while the job runs,
// and its last value is stored before the job is done.
func TestProgressVisibleWhileRunningAndAtTheEnd(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	reported := make(chan time.Time, 1)
	again, release := make(chan struct{}), make(chan struct{})
	mux := NewMux()
	mux.HandleFunc("long", func(ctx context.Context, j *queue.Job) error {
		Progress(ctx, 42, "halfway there")
		reported <- time.Now()
		<-again
		Progress(ctx, 43, "a little further") // within a second of the last send: held back
		reported <- time.Now()
		<-release
		Progress(ctx, 99, "almost")
		Progress(ctx, 100, "all rows imported") // the latest wins, sent before the ack
		return nil
	})
	startWorker(t, c, Config{Handler: mux})
	id := enqueue(t, c, "long", "")
	visible := func(pct int) {
		t.Helper()
		at := <-reported
		for {
			j, err := c.Get(ctx, "default", id)
			if err == nil && j.Progress == pct && !j.ProgressAt.IsZero() {
				break
			}
			if time.Since(at) > 3*time.Second {
				t.Fatalf("progress %d%% not visible 3s after the report: %+v, %v", pct, j, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		seen := time.Since(at)
		t.Logf("progress %d%% visible %v after worker.Progress", pct, seen)
		if seen > 1500*time.Millisecond {
			t.Errorf("progress %d%% visible after %v, want within about 1s", pct, seen)
		}
	}
	visible(42)
	close(again)
	visible(43)
	close(release)
	j := waitState(t, c, "default", id, queue.StateDone, 5*time.Second)
	if j.Progress != 100 || j.ProgressMessage != "all rows imported" {
		t.Errorf("done job's progress = %d%% %q, want the last report, 100%% all rows imported", j.Progress, j.ProgressMessage)
	}
	Progress(context.Background(), 1, "outside a handler") // does nothing, and must not panic
}

// A worker that lost its lease cannot write progress: its progress call is refused by the
// script, which reports the lease lost, and the handler is cancelled.
func TestProgressAfterLostLeaseIsNotWritten(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	c, prefix := clientWithPrefix(t, rdb)
	stolen := make(chan struct{})
	cause := make(chan error, 1)
	mux := NewMux()
	mux.HandleFunc("long", func(ctx context.Context, j *queue.Job) error {
		Progress(ctx, 10, "before")
		<-stolen
		for i := 0; ctx.Err() == nil && i < 300; i++ {
			Progress(ctx, 77, "after the lease was lost")
			time.Sleep(10 * time.Millisecond)
		}
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	startWorker(t, c, Config{Handler: mux})
	id := enqueue(t, c, "long", "")
	key := prefix + ":{default}:job:" + id
	eventually(t, 3*time.Second, "first progress stored", func() bool {
		return rdb.HGet(ctx, key, "progress").Val() == "10"
	})
	// Another worker takes the job over (as after a reap and a new claim).
	if err := rdb.HSet(ctx, key, "lease", "someone-else.1:1").Err(); err != nil {
		t.Fatal(err)
	}
	close(stolen)
	select {
	case err := <-cause:
		if !errors.Is(err, ErrLeaseLost) {
			t.Errorf("handler's context cause = %v, want %v", err, ErrLeaseLost)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled 5s after its lease was lost")
	}
	h := rdb.HGetAll(ctx, key).Val()
	if h["progress"] != "10" || h["progress_msg"] != "before" {
		t.Errorf("progress after the lost lease = %q %q, want the holder's 10 before", h["progress"], h["progress_msg"])
	}
}

// An exec handler reports progress on fd 3; bad and over-long lines are ignored.
func TestExecProgressOnFD3(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	mux := NewMux()
	mux.Handle("sh", mustExec(t, `sh -c '
echo "not a number" >&3
echo "25% a quarter" >&3
echo "150 too much" >&3
printf "50 %5000s\n" long >&3
echo "  60.7	sixty   " >&3
echo "-1 negative" >&3
printf "fd=%s" "$JOB_PROGRESS_FD"'`))
	startWorker(t, c, Config{Handler: mux})
	id := enqueue(t, c, "sh", "")
	j := waitState(t, c, "default", id, queue.StateDone, 5*time.Second)
	if string(j.Result) != "fd=3" {
		t.Errorf("result = %q, want JOB_PROGRESS_FD=3", j.Result)
	}
	if j.Progress != 60 || j.ProgressMessage != "sixty" || j.ProgressAt.IsZero() {
		t.Errorf("progress = %d%% %q at %v, want the last good line: 60%% sixty", j.Progress, j.ProgressMessage, j.ProgressAt)
	}
}

func TestParseProgress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		pct  int
		msg  string
		ok   bool
	}{
		{"40 resizing\n", 40, "resizing", true},
		{"100", 100, "", true},
		{"0\n", 0, "", true},
		{"12.9% rows", 12, "rows", true},
		{"\t7\t tab separated \r\n", 7, "tab separated", true},
		{"101 over", 0, "", false},
		{"-0.5 under", 0, "", false},
		{"NaN x", 0, "", false},
		{"half done", 0, "", false},
		{"", 0, "", false},
	} {
		pct, msg, ok := parseProgress(tc.line)
		if pct != tc.pct || msg != tc.msg || ok != tc.ok {
			t.Errorf("parseProgress(%q) = %d, %q, %v; want %d, %q, %v", tc.line, pct, msg, ok, tc.pct, tc.msg, tc.ok)
		}
	}
}

// The cost target: progress at 10 Hz from 1,000 running jobs on 10 workers costs about 10
// Redis calls a second in all, counted by the server (INFO commandstats) against the same
// jobs running without progress.
func TestProgressCallRate(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for about 25s")
	}
	srv := redistest.Own(t)
	rdb := srv.Client(t)
	c, _ := clientWithPrefix(t, rdb)
	const workers, perWorker = 10, 100
	var reporting atomic.Bool
	reporting.Store(true)
	release := make(chan struct{})
	var running atomic.Int64
	mux := NewMux()
	mux.HandleFunc("long", func(ctx context.Context, j *queue.Job) error {
		running.Add(1)
		tick := time.NewTicker(100 * time.Millisecond) // 10 Hz
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
				if reporting.Load() {
					Progress(ctx, i%101, "step "+strconv.Itoa(i))
				}
			}
		}
	})
	batch := make([]queue.BatchJob, workers*perWorker)
	for i := range batch {
		batch[i] = queue.BatchJob{Type: "long"}
	}
	if _, err := c.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var stops []func()
	for range workers {
		stops = append(stops, startWorker(t, c, Config{Handler: mux, Concurrency: perWorker,
			Logger: quietLogger(t)}))
	}
	eventually(t, 20*time.Second, "1,000 jobs running", func() bool { return running.Load() == workers*perWorker })
	time.Sleep(2 * time.Second) // past the claims, into the steady state
	rate := func() float64 {
		const window = 10 * time.Second // one heartbeat round (Lease/3) of each worker
		before := totalCalls(t, rdb)
		time.Sleep(window)
		return float64(totalCalls(t, rdb)-before) / window.Seconds()
	}
	with := rate()
	reporting.Store(false)
	time.Sleep(time.Second)
	without := rate()
	t.Logf("Redis calls/s with progress at 10 Hz from %d jobs on %d workers: %.1f; without: %.1f; progress costs %.1f/s",
		workers*perWorker, workers, with, without, with-without)
	if with-without > 12 {
		t.Errorf("progress costs %.1f Redis calls/s, want about 10 at most", with-without)
	}
	close(release)
	var wg sync.WaitGroup
	for _, stop := range stops {
		wg.Add(1)
		go func() { defer wg.Done(); stop() }()
	}
	wg.Wait()
}

// eventually polls cond until it holds, failing the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quietLogger logs warnings and errors only, to t.
func quietLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// totalCalls is the number of calls clients have made to the server: script calls
// (EVALSHA, EVAL) and blocking waits (BLPOP), which is all a busy worker sends, from INFO
// commandstats. The commands a script runs inside Redis are listed there too, under
// their own names (HSET, ZADD, ...), but they are not calls: they cost no round trip.
func totalCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || (name != "evalsha" && name != "eval" && name != "blpop") {
			continue
		}
		var n int64
		if _, err := fmt.Sscanf(rest, "%d", &n); err == nil {
			total += n
		}
	}
	return total
}
