package main

import (
	"bufio"
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// TestRedisRestart SIGKILLs a redis-server that persists with appendonly under a steady
// enqueue and two `jobs worker` processes, restarts it on the same port and directory
// 2s later, and checks that the enqueuer and the workers carry on by themselves (no
// process exits), that they back off instead of spinning while Redis is gone (their CPU
// time during the outage), and which acknowledged enqueues survived: with appendfsync
// always, every one.
func TestRedisRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a redis-server under load")
	}
	t.Parallel()
	for _, fsync := range []string{"always", "everysec"} {
		t.Run(fsync, func(t *testing.T) {
			t.Parallel()
			testRedisRestart(t, fsync)
		})
	}
}

// ackedEnqueue is one enqueue the enqueuer child reported acknowledged.
type ackedEnqueue struct {
	id string
	at time.Time
}

func testRedisRestart(t *testing.T, fsync string) {
	srv := redistest.Own(t, "--appendonly", "yes", "--appendfsync", fsync)
	rdb := srv.Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	k := queueKeys{prefix, queue.DefaultQueue}
	base := []string{"--redis", "redis://" + srv.Addr, "--prefix", prefix}

	var workers []*child
	for range 2 {
		workers = append(workers, startCLI(t, append(base, "worker", "--lease", "2s", "--concurrency", "4",
			"--run", "ok=true", "--log-level", "warn")...))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, w := range workers {
				out := w.out.String()
				t.Logf("worker %d's log (last 4 KiB):\n%s", i, out[max(0, len(out)-4096):])
			}
		}
	})
	watch := startCLI(t, append(base, "stats", "--watch")...)

	var (
		mu      sync.Mutex // guards acked and failed while the enqueuer runs
		acked   []ackedEnqueue
		failed  int
		readAll = make(chan struct{})
	)
	pr, pw := io.Pipe()
	enq := startChild(t, "enqueuer", pw, "JOBS_TEST_REDIS="+srv.Addr, "JOBS_TEST_PREFIX="+prefix)
	go func() {
		defer close(readAll)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			verdict, rest, _ := strings.Cut(sc.Text(), " ")
			mu.Lock()
			if verdict == "ok" {
				acked = append(acked, ackedEnqueue{rest, time.Now()})
			} else {
				failed++
			}
			mu.Unlock()
		}
	}()

	time.Sleep(1500 * time.Millisecond)
	cpuBefore := make([]time.Duration, len(workers))
	for i, w := range workers {
		cpuBefore[i] = w.cpu(t)
	}
	killed := time.Now()
	srv.Kill()
	mu.Lock()
	ackedBefore := len(acked)
	mu.Unlock()
	time.Sleep(2 * time.Second)
	var outageCPU []time.Duration
	for i, w := range workers {
		outageCPU = append(outageCPU, w.cpu(t)-cpuBefore[i])
	}
	cpuWindow := time.Since(killed)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now() // Restart returns once the server answers PING: its AOF is loaded
	outage := restarted.Sub(killed)

	// Enqueues and jobs resume by themselves: the first enqueue acknowledged and the first
	// job done after the restart.
	var enqueueBack, workBack time.Duration
	workSeen := false
	waitFor(t, 20*time.Second, "enqueues and jobs resume after the restart", func() bool {
		if enqueueBack == 0 {
			mu.Lock()
			if len(acked) > 0 && acked[len(acked)-1].at.After(restarted) {
				for _, a := range acked {
					if a.at.After(restarted) {
						enqueueBack = a.at.Sub(restarted)
						break
					}
				}
			}
			mu.Unlock()
		}
		if !workSeen {
			// Done in the restart's millisecond or after (Redis's ms; the workers may
			// reconnect before Restart's PING returns): 0 at least, never negative, which
			// read as not yet back (a worker handed a job at once did that).
			first, err := rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: k.key("done"),
				Start: strconv.FormatInt(restarted.UnixMilli(), 10), Stop: "+inf", ByScore: true, Count: 1}).Result()
			if err == nil && len(first) == 1 {
				workSeen, workBack = true, max(time.UnixMilli(int64(first[0].Score)).Sub(restarted), 0)
			}
		}
		if enqueueBack > 0 && workSeen {
			return true
		}
		if time.Since(restarted) > 19*time.Second {
			mu.Lock()
			t.Logf("after the restart: enqueue back %v, work back %v; %d enqueues acked, %d failed; Redis: %v",
				enqueueBack, workBack, len(acked), failed, rdb.Info(ctx, "keyspace").Val())
			mu.Unlock()
		}
		return false
	})
	time.Sleep(time.Second) // a little steady state after the restart
	if err := enq.stop(); err != nil {
		t.Errorf("enqueuer exit: %v", err)
	}
	pw.Close()
	<-readAll

	// Every acknowledged job that survived runs; those whose hash is gone were lost.
	var lost []string
	waitFor(t, 20*time.Second, "every surviving job done", func() bool {
		lost = lost[:0]
		notDone := 0
		cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, a := range acked {
				p.HGet(ctx, k.job(a.id), "state")
			}
			return nil
		})
		for i, c := range cmds {
			state, err := c.(*redis.StringCmd).Result()
			switch {
			case err == redis.Nil:
				lost = append(lost, acked[i].id)
			case state != string(queue.StateDone):
				notDone++
			}
		}
		return notDone == 0
	})
	lostBefore := 0
	for _, a := range acked {
		if a.at.Before(killed) && contains(lost, a.id) {
			lostBefore++
		}
	}
	if fsync == "always" && len(lost) > 0 {
		t.Errorf("appendfsync always: %d acknowledged enqueues lost: %v", len(lost), lost[:min(len(lost), 5)])
	}
	if bad := inconsistencies(ctx, rdb, k); len(bad) > 0 {
		t.Errorf("inconsistent keys after the restart: %q", bad[:min(len(bad), 10)])
	}
	// Jobs whose enqueue ran but whose reply was lost to the crash exist without having
	// been acknowledged: the caller saw an error and may enqueue them again.
	extra := rdb.ZCard(ctx, k.key("done")).Val() - int64(len(acked)-len(lost))

	for _, c := range append(workers, watch) {
		if c.cmd.ProcessState != nil {
			t.Fatalf("a process exited during the outage: %s\n%s", c.cmd.ProcessState, c.out)
		}
	}
	var retries []int
	for i, w := range workers {
		if err := w.stop(); err != nil {
			t.Errorf("worker %d exit: %v\n%s", i, err, w.out)
		}
		retries = append(retries, strings.Count(w.out.String(), "Redis call failed; retrying"))
		// No busy spin: a worker that backs off uses a few ms of CPU in a 2s outage.
		if outageCPU[i] > cpuWindow/10 {
			t.Errorf("worker %d used %s of CPU in %s without Redis: it spins instead of backing off\n%s",
				i, outageCPU[i], cpuWindow.Round(time.Millisecond), w.out)
		}
	}
	if err := watch.stop(); err != nil {
		t.Errorf("stats --watch exit: %v\n%s", err, watch.out)
	}
	t.Logf("FIGURES restart appendfsync %s: %d enqueues acknowledged (%d before the kill), %d refused during the outage, "+
		"%d done without an acknowledgement; lost %d (%d acked before the kill); outage (kill to PING) %s; "+
		"first enqueue acknowledged %s after the restart, first job done %s after it; "+
		"worker CPU in the first %s of the outage %v, Redis-error log lines per worker %v",
		fsync, len(acked), ackedBefore, failed, extra, len(lost), lostBefore, outage.Round(time.Millisecond),
		enqueueBack.Round(time.Millisecond), workBack.Round(time.Millisecond), cpuWindow.Round(time.Millisecond), outageCPU, retries)
}

// startCLI runs the CLI as a child process with exactly these arguments.
func startCLI(t *testing.T, args ...string) *child {
	t.Helper()
	return startChild(t, "jobs", nil, "JOBS_TEST_ARGS="+strings.Join(args, "\x1f"))
}
