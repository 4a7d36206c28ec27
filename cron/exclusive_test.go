package cron

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// An exclusive entry whose job overruns its interval skips the ticks that come while
// its last job is pending or running: never two of its jobs at once, and no backlog. Its
// jobs used to queue up behind the lock, postponed over and over (6 postponed jobs after
// 10 s of a 2.5 s job every second, growing, run out of tick order: QA).
func TestExclusiveEntrySkipsTicksWhileItsJobRuns(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var mu sync.Mutex
	var running, most int
	var ran []string
	w, err := worker.New(c, worker.Config{Queues: map[string]int{"exq": 1}, Concurrency: 4, Logger: quiet(),
		Handler: worker.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			mu.Lock()
			running++
			most = max(most, running)
			ran = append(ran, j.ID)
			mu.Unlock()
			time.Sleep(2500 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { w.Run(wctx); close(stopped) }()
	defer func() { stopWorker(); <-stopped }()
	stop := runScheduler(t, c, Config{Entries: []Entry{{Name: "overrun", Spec: "@every 1s", Type: "t",
		Queue: "exq", Exclusive: true}}})
	time.Sleep(6 * time.Second)
	stop()
	var jobs []*queue.Job
	for _, st := range []queue.State{queue.StateScheduled, queue.StateReady, queue.StateActive, queue.StateDone} {
		page, err := c.Page(ctx, "exq", st, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, page.Jobs...)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Errorf("%d of the entry's jobs ran at once, want 1", most)
	}
	// Ticks every second for 6 s, each job 2.5 s: a job at about 0, 3 and 6 s at most.
	if len(ran) < 2 || len(ran) > 3 {
		t.Errorf("%d jobs ran (%v), want 2 or 3: the ticks while one ran skipped", len(ran), ran)
	}
	for _, j := range jobs {
		if j.Postponed > 0 || j.State == queue.StateScheduled {
			t.Errorf("job %s: state %s, postponed %d; want none waiting on the lock", j.ID, j.State, j.Postponed)
		}
	}
	if len(jobs) > 4 {
		t.Errorf("%d jobs of the entry in Redis, want at most 4: a backlog", len(jobs))
	}
}
