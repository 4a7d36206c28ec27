package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// TestCluster runs the CLI, a worker process on three queues that live on three
// different masters, and a scheduler process against a local 3-master Redis Cluster given
// by --cluster: jobs enqueued now, later and from cron all run, and an idle worker is
// woken at once by a job on any node (not at its 1 s re-check).
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	t.Parallel()
	cl, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	p := redistest.Prefix(t)
	base := []string{"--cluster", "--redis", cl.URL(), "--prefix", p}
	jobsC := func(args ...string) result { return runCLI("", append(slices.Clone(base), args...)...) }

	// Three queues whose keys hash to three different masters.
	rdb := cl.Client(t)
	var qs []string
	seen := map[string]bool{}
	for i := 0; len(qs) < 3; i++ {
		q := fmt.Sprintf("q%d", i)
		node, err := rdb.MasterForKey(context.Background(), p+":{"+q+"}:ready")
		if err != nil {
			t.Fatal(err)
		}
		if !seen[node.Options().Addr] {
			seen[node.Options().Addr] = true
			qs = append(qs, q)
		}
	}

	worker, wout := jobsProcessArgs(t, append(slices.Clone(base), "worker", "--concurrency", "4",
		"--queue", qs[0], "--queue", qs[1]+"=2", "--queue", qs[2], "--queue", "default", "--run", "ok=true", "--run", "bad=false")...)
	sched, sout := jobsProcessArgs(t, append(slices.Clone(base), "scheduler",
		"--cron", "tick '@every 1s' ok {}")...)

	var ids []string
	for _, q := range qs {
		for range 5 {
			r := jobsC("enqueue", "--queue", q, "ok", `{"n":1}`)
			if r.code != 0 {
				t.Fatalf("enqueue on %s = %+v", q, r)
			}
			ids = append(ids, strings.TrimSpace(r.stdout))
		}
		r := jobsC("enqueue", "--queue", q, "--delay", "300ms", "ok")
		if r.code != 0 {
			t.Fatalf("enqueue --delay on %s = %+v", q, r)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	bad := strings.TrimSpace(jobsC("enqueue", "--queue", qs[2], "--max-retry", "0", "bad").stdout)
	for _, id := range ids {
		waitFor(t, 10*time.Second, "job "+id+" done", func() bool {
			return strings.Contains(jobsC("inspect", "--json", id).stdout, `"state":"done"`)
		})
	}
	waitFor(t, 10*time.Second, "failing job dead", func() bool {
		return strings.Contains(jobsC("inspect", "--json", bad).stdout, `"state":"dead"`)
	})

	// Idle pickup across nodes: the worker blocks on every queue's wake list at once. Each
	// pickup is the job's start less its creation, both by Redis's clock: the CLI
	// processes that enqueue and inspect take tens of ms each to start on a loaded
	// machine, which timing them would add.
	var pickups []time.Duration
	for i := range 6 {
		q := qs[i%3]
		time.Sleep(100 * time.Millisecond) // let the worker go idle
		id := strings.TrimSpace(jobsC("enqueue", "--queue", q, "ok").stdout)
		var j struct {
			State     string    `json:"state"`
			CreatedAt time.Time `json:"created_at"`
			StartedAt time.Time `json:"started_at"`
		}
		waitFor(t, 5*time.Second, "pickup on "+q, func() bool {
			return json.Unmarshal([]byte(jobsC("inspect", "--json", id).stdout), &j) == nil && j.State == "done"
		})
		pickups = append(pickups, j.StartedAt.Sub(j.CreatedAt))
	}
	slices.Sort(pickups)
	if med := pickups[len(pickups)/2]; med > 500*time.Millisecond {
		t.Errorf("idle pickup across nodes: median %s (all %v), want well under the 1s re-check", med, pickups)
	}
	t.Logf("idle pickup across nodes (created -> started, Redis's clock): %v", pickups)

	// Cron fires on the cluster too, and stats/ls see every node.
	waitFor(t, 10*time.Second, "cron ticks run", func() bool {
		r := jobsC("ls", "default", "--state", "done")
		return strings.Count(r.stdout, `cron:tick:`) >= 2
	})
	r := jobsC("stats", "--json")
	var stats struct {
		Queues []struct {
			Name       string `json:"name"`
			Done, Dead int
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &stats); err != nil {
		t.Fatalf("stats --json: %v: %q", err, r.stdout)
	}
	done := map[string]int{}
	for _, q := range stats.Queues {
		done[q.Name] = q.Done
	}
	for _, q := range qs {
		if done[q] < 6 {
			t.Errorf("stats: %d done on %s, want >= 6: %s", done[q], q, r.stdout)
		}
	}
	// doctor checks every master (persistence is off in tests: warnings, and exit 0).
	if r := jobsC("doctor"); r.code != 0 || strings.Count(r.stdout, "cluster: state ok") != 3 {
		t.Errorf("doctor on the cluster = %+v, want each of the 3 masters checked", r)
	}
	if r := jobsC("pause", qs[1]); r.code != 0 {
		t.Errorf("pause = %+v", r)
	}
	if r := jobsC("resume", qs[1]); r.code != 0 {
		t.Errorf("resume = %+v", r)
	}

	worker.Process.Signal(syscall.SIGTERM)
	sched.Process.Signal(syscall.SIGTERM)
	if err := worker.Wait(); err != nil {
		t.Errorf("worker exit: %v\n%s", err, wout)
	}
	if err := sched.Wait(); err != nil {
		t.Errorf("scheduler exit: %v\n%s", err, sout)

	}
	for _, out := range []string{wout.String(), sout.String()} {
		if strings.Contains(out, "CROSSSLOT") || strings.Contains(out, "Redis call failed") || strings.Contains(out, "wait failed") || strings.Contains(out, "heartbeat failed") {
			t.Errorf("errors in the processes' logs:\n%s", out)
		}
	}
}

// TestSentinelFailover runs a worker process and a steady enqueuer against a master found
// through a Sentinel (--sentinel-master), SIGKILLs the master, and checks that both carry
// on against the promoted replica by themselves: every job enqueued after the failover
// runs, nothing stays stuck, and the only jobs that can be lost are ones acknowledged in
// the last moments before the crash (Redis replication is asynchronous), which it counts.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a master, a replica and a Sentinel")
	}
	t.Parallel()
	st, err := redistest.StartSentinel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Stop)
	p := redistest.Prefix(t)
	base := []string{"--sentinel-master", st.MasterName, "--redis", st.URL(), "--prefix", p}
	worker, wout := jobsProcessArgs(t, append(slices.Clone(base), "worker",
		"--lease", "2s", "--concurrency", "20", "--run", "ok=true", "--log-level", "warn")...)

	client, err := queue.NewClient(st.Client(t), queue.Config{Prefix: p})
	if err != nil {
		t.Fatal(err)
	}
	type ack struct {
		id string
		at time.Time
	}
	var (
		mu      sync.Mutex // guards acks and refused while the enqueuer runs
		acks    []ack
		refused int
	)
	stop := make(chan struct{})
	enqueued := make(chan struct{})
	go func() {
		defer close(enqueued)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			id, err := client.Enqueue(ctx, "ok", nil)
			cancel()
			mu.Lock()
			if err != nil {
				refused++
			} else {
				acks = append(acks, ack{id, time.Now()})
			}
			mu.Unlock()
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	time.Sleep(1500 * time.Millisecond)
	killed := time.Now()
	st.Master.Kill()
	// Carry on until the enqueuer has been back for 2 s.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		i := slices.IndexFunc(acks, func(a ack) bool { return a.at.After(killed) })
		var back time.Time
		if i >= 0 {
			back = acks[i].at
		}
		mu.Unlock()
		if !back.IsZero() && time.Since(back) > 2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			<-enqueued
			t.Fatalf("no enqueue succeeded within 30s of the master's death (%d refused)", refused)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-enqueued

	var before, after int
	var firstAfter time.Time
	for _, a := range acks {
		if a.at.Before(killed) {
			before++
		} else {
			after++
			if firstAfter.IsZero() {
				firstAfter = a.at
			}
		}
	}
	if after == 0 {
		t.Fatalf("no enqueue acknowledged after the failover (%d before, %d refused)", before, refused)
	}

	// Every job that survived ends done: claims on the dead master come back after the
	// lease, and the worker reconnected to the new master by itself.
	ctx := context.Background()
	var lostBefore, lostAfter, notDone int
	var resumed time.Time // the first job the worker finished after the failover
	waitFor(t, 30*time.Second, "every surviving job done", func() bool {
		lostBefore, lostAfter, notDone = 0, 0, 0
		for _, a := range acks {
			job, err := client.Get(ctx, queue.DefaultQueue, a.id)
			if err == nil && job.FinishedAt.After(killed) && (resumed.IsZero() || job.FinishedAt.Before(resumed)) {
				resumed = job.FinishedAt
			}
			switch {
			case errors.Is(err, queue.ErrNotFound) && a.at.Before(killed):
				lostBefore++
			case errors.Is(err, queue.ErrNotFound):
				lostAfter++
			case err != nil:
				notDone++
			case job.State != queue.StateDone:
				notDone++
			}
		}
		return notDone == 0
	})
	if lostAfter > 0 {
		t.Errorf("%d jobs acknowledged after the failover were lost", lostAfter)
	}
	if worker.ProcessState != nil {
		t.Fatalf("worker process exited: %s", wout)
	}
	t.Logf("sentinel failover: %d enqueues acknowledged before the master was killed, %d after "+
		"(first %s after the kill), %d refused during the failover; worker finished its first job "+
		"%s after the kill; lost: %d acknowledged before the kill (asynchronous replication), %d after",
		before, after, firstAfter.Sub(killed).Round(time.Millisecond), refused,
		resumed.Sub(killed).Round(time.Millisecond), lostBefore, lostAfter)
	if r := runCLI("", append(slices.Clone(base), "stats")...); r.code != 0 {
		t.Errorf("stats through the Sentinel = %+v", r)
	}
	worker.Process.Signal(syscall.SIGTERM)
	if err := worker.Wait(); err != nil {
		t.Errorf("worker exit: %v\n%s", err, wout)
	}
}
