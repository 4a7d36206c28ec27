package main

// Shared pieces of the fault tests (worker_fault_test.go, redis_fault_test.go,
// network_fault_test.go): child processes that run a real worker or a steady enqueuer,
// a TCP proxy that can cut or stall connections, a consistency scan of a queue's keys,
// and a process's CPU time from /proc. RELIABILITY.md quotes the figures these tests log.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// childRedis opens Redis the way the CLI does (openRedis): fail fast on a dial, retry a
// command once, and leave longer outages to the worker's own backoff. Child processes use
// it so they behave like `jobs worker`, with a Go handler the CLI cannot take.
func childRedis(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, MaxRetries: 1, DialerRetries: 2})
}

// envDuration reads a duration from the environment, def when unset.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// countingWorker is the child process of the fault tests (JOBS_TEST_CHILD=counting-worker):
// a real worker whose handler records each run of a job before doing anything else (so
// the parent sees every run a kill or a lost lease repeated), then works for
// JOBS_TEST_WORK to 2xJOBS_TEST_WORK ignoring cancellation, as a handler in the middle of
// a side effect would, and returns success with its worker ID as the result.
//
// Environment: JOBS_TEST_REDIS (the worker's Redis, possibly a proxy), JOBS_TEST_COUNT_REDIS
// (where runs are counted, default the same), JOBS_TEST_PREFIX, JOBS_TEST_ID (worker ID),
// JOBS_TEST_LEASE (default 1s), JOBS_TEST_CONCURRENCY (default 8), JOBS_TEST_WORK
// (default 20ms), JOBS_TEST_QUEUES (comma-separated, default the default queue). It logs
// warnings and errors as text on stderr.
func countingWorker() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rdb := childRedis(os.Getenv("JOBS_TEST_REDIS"))
	counter := rdb
	if addr := os.Getenv("JOBS_TEST_COUNT_REDIS"); addr != "" {
		counter = childRedis(addr)
	}
	prefix := os.Getenv("JOBS_TEST_PREFIX")
	client, err := queue.NewClient(rdb, queue.Config{Prefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	concurrency, _ := strconv.Atoi(os.Getenv("JOBS_TEST_CONCURRENCY"))
	work := envDuration("JOBS_TEST_WORK", 20*time.Millisecond)
	id := os.Getenv("JOBS_TEST_ID")
	var queues map[string]int
	if qs := os.Getenv("JOBS_TEST_QUEUES"); qs != "" {
		queues = map[string]int{}
		for _, q := range strings.Split(qs, ",") {
			queues[q] = 1
		}
	}
	w, err := worker.New(client, worker.Config{
		Queues:      queues,
		ID:          id,
		Concurrency: concurrency,
		Lease:       envDuration("JOBS_TEST_LEASE", time.Second),
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Handler: worker.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			// Counted whatever happens to this run later, even if its lease is lost.
			if err := counter.HIncrBy(context.WithoutCancel(ctx), runsKey(prefix), j.ID, 1).Err(); err != nil {
				return err
			}
			// With JOBS_TEST_RUNNING, the handler is in the running set while it works, so
			// the parent counts running handlers across processes (limit_fault_test.go).
			running := os.Getenv("JOBS_TEST_RUNNING") != ""
			if running {
				counter.ZAdd(context.WithoutCancel(ctx), runningKey(prefix), redis.Z{Member: j.ID + "@" + id})
			}
			time.Sleep(work + rand.N(work+1))
			if running {
				counter.ZRem(context.WithoutCancel(ctx), runningKey(prefix), j.ID+"@"+id)
			}
			worker.SetResult(ctx, []byte(id))
			return nil
		}),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := w.Run(ctx); err != nil {
		return 1
	}
	return 0
}

// runsKey is the test's hash of job ID -> runs started, written by countingWorker.
func runsKey(prefix string) string { return prefix + ":test:runs" }

// runningKey is the ZSET of the handlers running now (JOBS_TEST_RUNNING): "<job>@<worker>".
func runningKey(prefix string) string { return prefix + ":test:running" }

// enqueuer is a child process (JOBS_TEST_CHILD=enqueuer) that enqueues jobs of type "ok"
// one after another on JOBS_TEST_REDIS until SIGTERM, printing "ok ID" once Redis has
// acknowledged an enqueue and "err MESSAGE" when one failed (backing off 50ms), so the
// parent knows exactly which jobs it was promised.
func enqueuer() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	client, err := queue.NewClient(childRedis(os.Getenv("JOBS_TEST_REDIS")), queue.Config{Prefix: os.Getenv("JOBS_TEST_PREFIX")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		id, err := client.Enqueue(cctx, "ok", nil)
		cancel()
		if err != nil {
			fmt.Fprintf(out, "err %s\n", oneLine(err.Error()))
			out.Flush()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		fmt.Fprintf(out, "ok %s\n", id)
		out.Flush()
		time.Sleep(3 * time.Millisecond)
	}
	return 0
}

// child is a child process of a fault test: this test binary in a JOBS_TEST_CHILD mode.
type child struct {
	cmd *exec.Cmd
	out *lockedBuffer // stdout and stderr, unless the caller took stdout
}

// startChild runs this test binary as child mode with env added, killing it when the
// test ends if it still runs. With stdout non-nil, the child's stdout goes there.
func startChild(t *testing.T, mode string, stdout io.Writer, env ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0]), out: &lockedBuffer{}}
	c.cmd.Env = append(append(os.Environ(), "JOBS_TEST_CHILD="+mode), env...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if stdout != nil {
		c.cmd.Stdout = stdout
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kill)
	return c
}

// kill SIGKILLs the child (as a crash would) and reaps it; a no-op once it has exited.
func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (c *child) stop() error {
	c.cmd.Process.Signal(syscall.SIGTERM)
	return c.cmd.Wait()
}

// cpu is the child's CPU time so far (user + system).
func (c *child) cpu(t *testing.T) time.Duration {
	t.Helper()
	d, err := cpuTime(c.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// lockedBuffer is a bytes.Buffer that a child may write while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// cpuTime reads a process's user + system CPU time from /proc/PID/stat (fields 14 and
// 15, in clock ticks of USER_HZ, which Linux fixes at 100 for /proc).
func cpuTime(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: split after it.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, raw)
	}
	f := strings.Fields(string(raw[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// queueKeys names the keys of one queue (KEYS.md), for the tests' own reads.
type queueKeys struct {
	prefix, queue string
}

func (k queueKeys) key(name string) string { return k.prefix + ":{" + k.queue + "}:" + name }
func (k queueKeys) job(id string) string   { return k.key("job:" + id) }

// stateSets maps each state to the sorted set that holds its jobs (ready is a list).
var stateSets = map[queue.State]string{
	queue.StateScheduled: "scheduled", queue.StateRetry: "retry", queue.StateActive: "active",
	queue.StateDone: "done", queue.StateDead: "dead",
}

// inconsistencies scans a queue's keys for what a half-done transition would leave (see
// KEYS.md "States"): a job hash that its state's list or set does not name, a list or set
// entry whose hash is missing or in another state, and an ID twice in ready. Empty means
// every job is in exactly the one place its state says.
func inconsistencies(ctx context.Context, rdb *redis.Client, k queueKeys) []string {
	var bad []string
	where := map[string]string{} // job ID -> the list or set that names it
	note := func(id, set string) {
		if prev, ok := where[id]; ok {
			bad = append(bad, fmt.Sprintf("job %s is in both %s and %s", id, prev, set))
		}
		where[id] = set
	}
	for _, id := range rdb.LRange(ctx, k.key("ready"), 0, -1).Val() {
		note(id, "ready")
	}
	for _, set := range stateSets {
		for _, id := range rdb.ZRange(ctx, k.key(set), 0, -1).Val() {
			note(id, set)
		}
	}
	hashes := map[string]bool{}
	iter := rdb.Scan(ctx, 0, k.job("*"), 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		id := strings.TrimPrefix(key, k.job(""))
		hashes[id] = true
		state := rdb.HGet(ctx, key, "state").Val()
		want := "ready"
		if s, ok := stateSets[queue.State(state)]; ok {
			want = s
		} else if state != string(queue.StateReady) {
			bad = append(bad, fmt.Sprintf("job %s has state %q", id, state))
			continue
		}
		if where[id] != want {
			bad = append(bad, fmt.Sprintf("job %s is %s but its %s entry is missing (found in %q)", id, state, want, where[id]))
		}
	}
	if err := iter.Err(); err != nil {
		bad = append(bad, "scan: "+err.Error())
	}
	for id, set := range where {
		if !hashes[id] {
			bad = append(bad, fmt.Sprintf("%s names job %s, which has no hash", set, id))
		}
	}
	return bad
}

// acks is how many attempts ended in an ack on a queue: the daily processed counters
// (every finished attempt) minus the failed ones (KEYS.md). With one ack per job, a
// second ack of any job would show as acks > jobs.
func acks(ctx context.Context, rdb *redis.Client, k queueKeys) int64 {
	sum := func(outcome string) int64 {
		var n int64
		for _, key := range rdb.Keys(ctx, k.key("stats:"+outcome+":*")).Val() {
			v, _ := rdb.Get(ctx, key).Int64()
			n += v
		}
		return n
	}
	return sum("processed") - sum("failed")
}

// runCounts reads the runs countingWorker recorded: job ID -> runs started.
func runCounts(ctx context.Context, rdb *redis.Client, prefix string) map[string]int {
	out := map[string]int{}
	for id, v := range rdb.HGetAll(ctx, runsKey(prefix)).Val() {
		out[id], _ = strconv.Atoi(v)
	}
	return out
}
