package queue

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/scripts"
)

func TestStatsCountsEveryState(t *testing.T) {
	c := setup(t, Config{})
	for range 3 {
		mustEnqueue(t, c, "a")
	}
	mustEnqueue(t, c, "a", Delay(time.Hour))
	mustEnqueue(t, c, "a", On("other"))
	j := claimOne(t, c, "default", time.Minute, "w")
	c.broker().Ack(ctx, j, nil)
	j = claimOne(t, c, "default", time.Minute, "w")
	c.broker().Fail(ctx, j, "x", time.Hour)
	claimOne(t, c, "default", time.Minute, "w") // stays active
	mustEnqueue(t, c, "a", MaxRetry(0))
	j = claimOne(t, c, "default", time.Minute, "w")
	c.broker().Fail(ctx, j, "x", 0) // no retries left: dead
	if err := c.Pause(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	stats, err := c.Stats(ctx)
	if err != nil || len(stats) != 2 {
		t.Fatalf("Stats() = %+v, %v", stats, err)
	}
	want := QueueStats{Name: "default", Ready: 0, Scheduled: 1, Active: 1, Retry: 1, Dead: 1, Done: 1,
		ProcessedToday: 3, FailedToday: 2}
	if stats[0] != want {
		t.Errorf("Stats()[0] = %+v\nwant        %+v", stats[0], want)
	}
	if o := stats[1]; o.Name != "other" || o.Ready != 1 || !o.Paused {
		t.Errorf("Stats()[1] = %+v", o)
	}
}

func TestDoneSetIsCapped(t *testing.T) {
	c := setup(t, Config{DoneMax: 3})
	var ids []string
	for range 5 {
		ids = append(ids, mustEnqueue(t, c, "a"))
	}
	for range 5 {
		c.broker().Ack(ctx, claimOne(t, c, "default", time.Minute, "w"), nil)
	}
	done, _ := c.List(ctx, "default", StateDone, 0, 10)
	if len(done) != 3 {
		t.Fatalf("List(done) = %v, want 3 (DoneMax)", jobIDs(done))
	}
	kept := map[string]bool{}
	for _, j := range done {
		kept[j.ID] = true
	}
	// Acks within one millisecond tie on score, so which 3 stay is not fixed; the 2
	// dropped must be gone entirely.
	for _, id := range ids {
		if _, err := c.Get(ctx, "default", id); !kept[id] && !errors.Is(err, ErrNotFound) {
			t.Errorf("trimmed done job %s still readable: %v", id, err)
		}
	}
}

func TestRetry(t *testing.T) {
	c := setup(t, Config{})
	dead := mustEnqueue(t, c, "a", MaxRetry(0))
	j := claimOne(t, c, "default", time.Minute, "w")
	c.broker().Fail(ctx, j, "boom", 0)
	if err := c.Retry(ctx, "default", dead); err != nil {
		t.Fatalf("Retry(dead) err = %v", err)
	}
	got, _ := c.Get(ctx, "default", dead)
	if got.State != StateReady || got.Attempt != 0 || got.LastError != "boom" {
		t.Errorf("retried dead job = %s attempt %d last_error %q", got.State, got.Attempt, got.LastError)
	}
	if ttl := c.rdb.PTTL(ctx, c.keys.queue("default").job(dead)).Val(); ttl > 0 {
		t.Errorf("retried job still expires in %s", ttl)
	}
	later := mustEnqueue(t, c, "a", Delay(time.Hour))
	if err := c.Retry(ctx, "default", later); err != nil {
		t.Errorf("Retry(scheduled) err = %v", err)
	}
	if err := c.Retry(ctx, "default", later); !errors.Is(err, ErrState) {
		t.Errorf("Retry(ready) err = %v, want ErrState", err)
	}
	if err := c.Retry(ctx, "default", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Retry(unknown) err = %v, want ErrNotFound", err)
	}
	j = claimOne(t, c, "default", time.Minute, "w")
	if err := c.Retry(ctx, "default", j.ID); !errors.Is(err, ErrState) {
		t.Errorf("Retry(active) err = %v, want ErrState", err)
	}
}

func TestRetryAllDead(t *testing.T) {
	c := setup(t, Config{})
	for range 5 {
		mustEnqueue(t, c, "a", MaxRetry(0))
	}
	for range 5 {
		c.broker().Fail(ctx, claimOne(t, c, "default", time.Minute, "w"), "x", 0)
	}
	n, err := c.RetryAllDead(ctx, "default")
	if err != nil || n != 5 {
		t.Fatalf("RetryAllDead() = %d, %v; want 5", n, err)
	}
	if got := c.rdb.LLen(ctx, c.keys.queue("default").ready).Val(); got != 5 {
		t.Errorf("ready = %d, want 5", got)
	}
}

func TestCancel(t *testing.T) {
	c := setup(t, Config{})
	ready := mustEnqueue(t, c, "a", Unique(time.Hour))
	sched := mustEnqueue(t, c, "a", Delay(time.Hour))
	for _, id := range []string{ready, sched} {
		state, err := c.Cancel(ctx, "default", id)
		if err != nil || state != StateDead {
			t.Fatalf("Cancel(%s) = %s, %v; want dead", id, state, err)
		}
		got, _ := c.Get(ctx, "default", id)
		if got.State != StateDead || got.LastError != "cancelled by operator" {
			t.Errorf("cancelled job = %s %q", got.State, got.LastError)
		}
	}
	if _, err := c.Enqueue(ctx, "a", []byte(`{"n":1}`), Unique(time.Hour)); err != nil {
		t.Errorf("unique key not released by cancel: %v", err)
	}
	active := claimOne(t, c, "default", time.Minute, "w")
	state, err := c.Cancel(ctx, "default", active.ID)
	if err != nil || state != StateActive {
		t.Fatalf("Cancel(active) = %s, %v; want active (cancelling)", state, err)
	}
	_, cancelled, _ := c.broker().Heartbeat(ctx, "default", time.Minute, []*Job{active})
	if len(cancelled) != 1 {
		t.Fatalf("Heartbeat() cancelled = %v, want [%s]", cancelled, active.ID)
	}
	if state, _ := c.broker().Fail(ctx, active, "context canceled", time.Second); state != StateDead {
		t.Errorf("cancelled job's failure went to %s, want dead", state)
	}
	if _, err := c.Cancel(ctx, "default", active.ID); !errors.Is(err, ErrState) {
		t.Errorf("Cancel(dead) err = %v, want ErrState", err)
	}
	if _, err := c.Cancel(ctx, "default", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel(unknown) err = %v, want ErrNotFound", err)
	}
}

func TestPauseResume(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a")
	c.Pause(ctx, "default")
	if jobs, _ := c.broker().Claim(ctx, "default", 1, time.Minute, "w"); len(jobs) != 0 {
		t.Fatal("claimed from a paused queue")
	}
	c.rdb.Del(ctx, c.keys.queue("default").wake)
	if err := c.Resume(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if q, token, _ := c.broker().Wait(ctx, []string{"default"}, 100*time.Millisecond); q != "default" || token != proto.WakeReady {
		t.Errorf("Resume() woke nobody: %q %q", q, token)
	}
	claimOne(t, c, "default", time.Minute, "w")
}

func TestPurge(t *testing.T) {
	c := setup(t, Config{})
	batch := make([]BatchJob, 2500)
	for i := range batch {
		batch[i] = BatchJob{Type: "a"}
	}
	batch[0].Options = []Option{Unique(time.Hour), UniqueKey("u")}
	if _, err := c.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	n, err := c.Purge(ctx, "default", StateReady)
	if err != nil || n != 2500 {
		t.Fatalf("Purge(ready) = %d, %v; want 2500", n, err)
	}
	if keys := c.rdb.Keys(ctx, c.cfg.Prefix+":{default}:job:*").Val(); len(keys) != 0 {
		t.Errorf("%d job hashes left after purge", len(keys))
	}
	if _, err := c.Enqueue(ctx, "a", nil, Unique(time.Hour), UniqueKey("u")); err != nil {
		t.Errorf("purge kept the unique key: %v", err)
	}
	if _, err := c.Purge(ctx, "default", StateActive); !errors.Is(err, ErrInvalid) {
		t.Errorf("Purge(active) err = %v, want ErrInvalid", err)
	}
}

// poison stands for workers that keep killing jobs while an operator's bulk operation
// runs: until stop, it adds fresh dead jobs (n per round, when add is set) and sends every
// ready job back to dead with a new score, as a poison job failing at once would.
func poison(t *testing.T, c *Client, queue string, add int, stop <-chan struct{}) *sync.WaitGroup {
	t.Helper()
	qk := c.keys.queue(queue)
	kill := poisonScript
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := kill.Run(ctx, c.rdb, []string{qk.ready, qk.dead, qk.jobPrefix + "seq"}, qk.jobPrefix, add).Err(); err != nil {
				t.Errorf("poison: %v", err)
				return
			}
		}
	})
	return &wg
}

// poisonScript sends every job of ready (KEYS[1]) to dead (KEYS[2]) with a new score,
// then adds ARGV[2] new dead jobs (IDs late-<n>, n from KEYS[3]).
var poisonScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  redis.call('HSET', ARGV[1] .. id, 'state', 'dead')
  redis.call('ZADD', KEYS[2], now, id)
end
redis.call('DEL', KEYS[1])
for i = 1, tonumber(ARGV[2]) do
  local id = 'late-' .. redis.call('INCR', KEYS[3])
  redis.call('HSET', ARGV[1] .. id, 'state', 'dead', 'type', 'a')
  redis.call('ZADD', KEYS[2], now, id)
end
return 0`)

// deadJobs makes n dead jobs on the default queue.
func deadJobs(t *testing.T, c *Client, n int) {
	t.Helper()
	batch := make([]BatchJob, n)
	for i := range batch {
		batch[i] = BatchJob{Type: "a", Options: []Option{MaxRetry(0)}}
	}
	if _, err := c.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for left := n; left > 0; {
		jobs, err := c.broker().Claim(ctx, "default", min(left, proto.MaxBatch), time.Minute, "w")
		if err != nil || len(jobs) == 0 {
			t.Fatalf("Claim() = %d, %v", len(jobs), err)
		}
		for _, j := range jobs {
			if st, err := c.broker().Fail(ctx, j, "poison", 0); err != nil || st != StateDead {
				t.Fatalf("Fail() = %s, %v; want dead", st, err)
			}
		}
		left -= len(jobs)
	}
}

// retry --all-dead while workers run used to loop for as long as a poison job kept dying
// again: each pass found it back in dead. It now retries the jobs dead when it starts.
func TestRetryAllDeadEndsWhileJobsKeepDying(t *testing.T) {
	c := setup(t, Config{})
	const n = 2500
	deadJobs(t, c, n)
	stop := make(chan struct{})
	wg := poison(t, c, "default", 0, stop)
	defer wg.Wait()
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	moved, err := c.RetryAllDead(tctx, "default")
	close(stop)
	if err != nil || moved > n {
		t.Fatalf("RetryAllDead() with jobs dying again = %d, %v; want at most the %d dead at the start, nil", moved, err, n)
	}
}

// dieOnPurge is a go-redis hook standing for workers whose jobs keep dying while a purge
// runs: before each purge script call, it adds 10 dead jobs, newer than every other.
type dieOnPurge struct {
	c    *Client // on another connection, so the hook does not call itself
	kill *redis.Script
	t    *testing.T
}

func (h dieOnPurge) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h dieOnPurge) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h dieOnPurge) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && a[0] == "evalsha" && a[1] == scripts.Purge.Hash() {
			qk := h.c.keys.queue("default")
			if err := h.kill.Run(ctx, h.c.rdb, []string{qk.ready, qk.dead, qk.jobPrefix + "seq"}, qk.jobPrefix, 10).Err(); err != nil {
				h.t.Errorf("dieOnPurge: %v", err)
			}
		}
		return next(ctx, cmd)
	}
}

// purge while workers run used to go on for as long as jobs kept dying (each call took
// the oldest 1000, then the ones that died meanwhile); it now deletes the jobs dead when
// it starts and spares the ones that die meanwhile.
func TestPurgeEndsWhileJobsKeepDying(t *testing.T) {
	c := setup(t, Config{})
	const n = 2500
	deadJobs(t, c, n)
	rdb := redistest.Client(t)
	rdb.AddHook(dieOnPurge{c: c, kill: poisonScript, t: t})
	purger, err := NewClient(rdb, c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	deleted, err := purger.Purge(tctx, "default", StateDead)
	if err != nil || deleted != n {
		t.Errorf("Purge(dead) with jobs dying meanwhile = %d, %v; want the %d dead at the start, nil", deleted, err, n)
	}
	late, _ := c.rdb.ZRange(ctx, c.keys.queue("default").dead, 0, -1).Result()
	if len(late) == 0 || len(late)%10 != 0 || !strings.HasPrefix(late[0], "late-") {
		t.Errorf("dead after the purge = %d jobs (first %.1q); want the ones that died meanwhile, 10 per purge call", len(late), late)
	}
}
