package queue

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
)

// testProcess is a worker entry as a worker would write it.
func testProcess(id string, queues ...string) *Process {
	p := &Process{ID: id, Kind: KindWorker, Host: "h", PID: 42, Version: "v1.2.3", Queues: map[string]int{},
		Types: []string{"a", "b"}, Concurrency: 8, Busy: 1, State: ProcessRunning}
	for _, q := range queues {
		p.Queues[q] = 2
	}
	return p
}

func mustRegister(t *testing.T, c *Client, p *Process, ttl time.Duration) (string, time.Time) {
	t.Helper()
	order, started, err := c.broker().Register(ctx, p, ttl)
	if err != nil {
		t.Fatalf("Register(%s) err = %v", p.ID, err)
	}
	return order, started
}

// The registry lists what a beat wrote, with the jobs each worker holds read from active
// and the job's worker field, and drops an entry at once on Deregister.
func TestRegistryListsProcessesAndTheirJobs(t *testing.T) {
	c := setup(t, Config{})
	_, started := mustRegister(t, c, testProcess("w1", "rq"), time.Minute)
	if started.IsZero() || time.Since(started) > time.Minute {
		t.Fatalf("Register() started = %v, want Redis's now", started)
	}
	mustRegister(t, c, &Process{ID: "s1", Kind: KindScheduler, State: ProcessRunning}, time.Minute)
	id := mustEnqueue(t, c, "a", On("rq"))
	mustEnqueue(t, c, "b", On("rq"))
	claimOne(t, c, "rq", time.Minute, "w1")
	claimOne(t, c, "rq", time.Minute, "gone-worker") // held by a worker not listed: not shown

	ps, err := c.Processes(ctx)
	if err != nil || len(ps) != 2 {
		t.Fatalf("Processes() = %d processes, %v; want 2", len(ps), err)
	}
	w := ps[slices.IndexFunc(ps, func(p *Process) bool { return p.ID == "w1" })]
	if w.Kind != KindWorker || w.Host != "h" || w.PID != 42 || w.Version != "v1.2.3" || w.Queues["rq"] != 2 ||
		!slices.Equal(w.Types, []string{"a", "b"}) || w.Concurrency != 8 || w.Busy != 1 || w.State != ProcessRunning ||
		!w.StartedAt.Equal(started) || w.BeatAt.Before(started) {
		t.Errorf("Processes() w1 = %+v", w)
	}
	if len(w.Running) != 1 || w.Running[0].ID != id || w.Running[0].Queue != "rq" || w.Running[0].Type != "a" ||
		w.Running[0].StartedAt.IsZero() {
		t.Errorf("w1 running = %+v, want job %s of type a", w.Running, id)
	}

	// A later beat passes back started_at: a Redis that lost its data lists the same start.
	p := testProcess("w1", "rq")
	p.StartedAt = started.Add(-time.Hour)
	if _, again := mustRegister(t, c, p, time.Minute); !again.Equal(p.StartedAt) {
		t.Errorf("Register(StartedAt %v) started = %v", p.StartedAt, again)
	}

	if err := c.broker().Deregister(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	ps, _ = c.Processes(ctx)
	if len(ps) != 1 || ps[0].ID != "s1" || c.rdb.Exists(ctx, proto.RegistryKeysOf(c.cfg.Prefix).Process+"w1").Val() != 0 {
		t.Errorf("after Deregister(w1): %d processes (want s1 alone), hash left %d", len(ps),
			c.rdb.Exists(ctx, proto.RegistryKeysOf(c.cfg.Prefix).Process+"w1").Val())
	}
}

// An entry not renewed within its TTL is not listed, cannot be given an order, and is
// dropped from the index by the next beat of any process.
func TestRegistryEntryExpires(t *testing.T) {
	c := setup(t, Config{})
	rk := proto.RegistryKeysOf(c.cfg.Prefix)
	for i := range 5 {
		mustRegister(t, c, testProcess(fmt.Sprintf("dead%d", i)), 150*time.Millisecond)
	}
	waitUntil(t, 2*time.Second, "entries expire", func() bool {
		ps, err := c.Processes(ctx)
		return err == nil && len(ps) == 0
	})
	if err := c.Quiet(ctx, "dead0"); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Quiet(expired) = %v, want ErrNoProcess", err)
	}
	mustRegister(t, c, testProcess("alive"), time.Minute)
	if got := c.rdb.ZRange(ctx, rk.Index, 0, -1).Val(); !slices.Equal(got, []string{"alive"}) {
		t.Errorf("index after a beat = %v, want [alive]: expired members must be pruned", got)
	}
}

// 10,000 processes that register and stop, and 10,000 more that register and die
// without a word, leave the index holding only the live ones: it cannot grow with churn.
func TestRegistryIndexBoundedUnderChurn(t *testing.T) {
	c := setup(t, Config{})
	rk := proto.RegistryKeysOf(c.cfg.Prefix)
	mustRegister(t, c, testProcess("steady"), time.Minute)
	const cycles, par = 10_000, 8
	most := int64(0)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range par {
		wg.Go(func() {
			for i := g; i < cycles; i += par {
				p := testProcess(fmt.Sprintf("clean%d", i))
				if _, _, err := c.broker().Register(ctx, p, time.Minute); err != nil {
					t.Error(err)
					return
				}
				if err := c.broker().Deregister(ctx, p.ID); err != nil {
					t.Error(err)
					return
				}
				// Killed: never deregistered, its entry lives 50ms.
				if _, _, err := c.broker().Register(ctx, testProcess(fmt.Sprintf("killed%d", i)), 50*time.Millisecond); err != nil {
					t.Error(err)
					return
				}
				if i%100 == 0 {
					n := c.rdb.ZCard(ctx, rk.Index).Val()
					mu.Lock()
					most = max(most, n)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	// Killed processes registered within the last 50ms may still be listed; the others
	// were pruned by later beats. What the index held at any sample is bounded by the
	// processes alive then plus those that died within one TTL, not by the 20,000 seen.
	if most > 2_000 {
		t.Errorf("index held up to %d members during %d cycles, want it bounded by live + recently dead", most, cycles)
	}
	// Once the last killed entries' TTL has passed, the live process's next beat leaves
	// it alone in the index.
	waitUntil(t, time.Second, "the index back to the one live process", func() bool {
		mustRegister(t, c, testProcess("steady"), time.Minute)
		return c.rdb.ZCard(ctx, rk.Index).Val() == 1
	})
	t.Logf("FIGURES registry churn: %d clean and %d killed processes, index at most %d members while churning, 1 after", cycles, cycles, most)
}

// Quiet and Stop leave an order for the process's next beat; stop is never taken back by a
// later quiet; an unknown process is ErrNoProcess.
func TestRegistryOrders(t *testing.T) {
	c := setup(t, Config{})
	mustRegister(t, c, testProcess("w"), time.Minute)
	if order, _ := mustRegister(t, c, testProcess("w"), time.Minute); order != "" {
		t.Fatalf("beat with no order = %q, want none", order)
	}
	if err := c.Quiet(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if order, _ := mustRegister(t, c, testProcess("w"), time.Minute); order != proto.OrderQuiet {
		t.Errorf("beat after Quiet = %q, want quiet", order)
	}
	if err := c.Stop(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if err := c.Quiet(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if order, _ := mustRegister(t, c, testProcess("w"), time.Minute); order != proto.OrderStop {
		t.Errorf("beat after Stop then Quiet = %q, want stop", order)
	}
	for _, f := range []func() error{
		func() error { return c.Quiet(ctx, "nobody") },
		func() error { return c.Stop(ctx, "nobody") },
	} {
		if err := f(); !errors.Is(err, ErrNoProcess) {
			t.Errorf("order to an unknown process = %v, want ErrNoProcess", err)
		}
	}
	if err := c.Stop(ctx, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Stop(\"\") = %v, want ErrInvalid", err)
	}
	if n := c.rdb.Exists(ctx, proto.RegistryKeysOf(c.cfg.Prefix).Process+"nobody").Val(); n != 0 {
		t.Errorf("an order to an unknown process wrote its hash")
	}
}

// Stats counts the running workers of each queue and gives the age of its next ready job.
func TestStatsWorkersAndLatency(t *testing.T) {
	c := setup(t, Config{})
	mustRegister(t, c, testProcess("w1", "lq", "other"), time.Minute)
	mustRegister(t, c, testProcess("w2", "lq"), time.Minute)
	quiet := testProcess("w3", "lq")
	quiet.State = ProcessQuiet
	mustRegister(t, c, quiet, time.Minute)
	mustEnqueue(t, c, "a", On("lq"))
	time.Sleep(50 * time.Millisecond) // the oldest job's age, to measure
	mustEnqueue(t, c, "a", On("lq"))
	mustEnqueue(t, c, "a", On("empty"))
	claimOne(t, c, "empty", time.Minute, "w1")
	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		switch s.Name {
		case "lq":
			if s.Workers != 2 || s.Latency < 50*time.Millisecond || s.Latency > 10*time.Second {
				t.Errorf("Stats(lq) workers %d latency %s; want 2 (w3 is quiet) and >= 50ms", s.Workers, s.Latency)
			}
		case "empty":
			if s.Workers != 0 || s.Latency != 0 {
				t.Errorf("Stats(empty) workers %d latency %s; want 0 and 0 (nothing ready)", s.Workers, s.Latency)
			}
		}
	}
}

// On a Redis Cluster the registry keeps to its slot while the queues its workers serve
// are on every node: Processes and Stats read across nodes.
func TestRegistryOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master Redis Cluster")
	}
	t.Parallel()
	cl, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	c, err := NewClient(cl.Client(t), Config{Prefix: "reg"})
	if err != nil {
		t.Fatal(err)
	}
	qs := queuesOnDistinctNodes(t, c, 3)
	mustRegister(t, c, testProcess("w", qs...), time.Minute)
	var ids []string
	for _, q := range qs {
		mustEnqueue(t, c, "a", On(q))
		ids = append(ids, claimOne(t, c, q, time.Minute, "w").ID)
		mustEnqueue(t, c, "a", On(q))
	}
	ps, err := c.Processes(ctx)
	if err != nil || len(ps) != 1 || len(ps[0].Running) != 3 {
		t.Fatalf("Processes() on a cluster = %+v, %v; want w running 3 jobs", ps, err)
	}
	for _, r := range ps[0].Running {
		if !slices.Contains(ids, r.ID) {
			t.Errorf("running on a cluster: %+v, want one of the claimed jobs %v", r, ids)
		}
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Workers != 1 || s.Ready != 1 || s.Latency <= 0 {
			t.Errorf("Stats(%s) on a cluster = %+v, want 1 worker, 1 ready, a latency", s.Name, s)
		}
	}
	if err := c.Stop(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if order, _ := mustRegister(t, c, testProcess("w", qs...), time.Minute); order != proto.OrderStop {
		t.Errorf("beat after Stop on a cluster = %q, want stop", order)
	}
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
