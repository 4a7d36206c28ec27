package queue

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

// claimOne claims the one ready job of q, failing the test when there is none or another.
func claimID(t *testing.T, c *Client, q, want string, lease time.Duration) *Job {
	t.Helper()
	jobs, err := c.broker().Claim(ctx, q, 10, lease, "w")
	if err != nil || len(jobs) != 1 || jobs[0].ID != want {
		ids := []string{}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		t.Fatalf("Claim(%s) = %v, %v; want only %s", q, ids, err, want)
	}
	return jobs[0]
}

func mustState(t *testing.T, c *Client, q, id string, want State) *Job {
	t.Helper()
	j, err := c.Get(ctx, q, id)
	if err != nil || j.State != want {
		t.Fatalf("Get(%s/%s) = %+v, %v; want state %s", q, id, j, err, want)
	}
	return j
}

// deliverAll delivers the outboxes of qs until they are empty, as workers do.
func deliverAll(t *testing.T, c *Client, qs ...string) {
	t.Helper()
	for _, q := range qs {
		for {
			n, err := c.broker().Deliver(ctx, q)
			if err != nil {
				t.Fatalf("Deliver(%s) err = %v", q, err)
			}
			if n == 0 {
				break
			}
		}
	}
}

func TestAfterWaitsForItsDependenciesThenRunsWithTheirResults(t *testing.T) {
	c := setup(t, Config{})
	a := mustEnqueue(t, c, "a")
	x := mustEnqueue(t, c, "x", On("other"))
	b := mustEnqueue(t, c, "b", After(a), AfterJob("other", x))
	j := mustState(t, c, "default", b, StateWaiting)
	if len(j.After) != 2 || j.After[0] != (JobRef{"default", a}) || j.After[1] != (JobRef{"other", x}) {
		t.Errorf("After = %v, want default/%s, other/%s", j.After, a, x)
	}
	ja := claimID(t, c, "default", a, time.Minute) // b is not ready
	if err := c.broker().Ack(ctx, ja, []byte("result-a")); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "default", b, StateWaiting) // x is pending still
	jx := claimID(t, c, "other", x, time.Minute)
	if err := c.broker().Ack(ctx, jx, []byte("result-x")); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "default", b, StateWaiting) // x's end is in other's outbox
	deliverAll(t, c, "other")
	mustState(t, c, "default", b, StateReady)
	jb := claimID(t, c, "default", b, time.Minute)
	deps, err := c.Dependencies(ctx, jb)
	if err != nil || len(deps) != 2 || string(deps[0].Result) != "result-a" || string(deps[1].Result) != "result-x" ||
		deps[0].Pending || deps[1].Pending || deps[1].State != StateDone {
		t.Errorf("Dependencies() = %+v, %v; want both done with their results", deps, err)
	}
	deliverAll(t, c, "other") // a second delivery finds nothing
	if n, _ := c.rdb.Exists(ctx, c.keys.queue("default").deps(b), c.keys.queue("other").outbox).Result(); n != 0 {
		t.Errorf("%d workflow keys left after the dependent ran, want 0", n)
	}
}

// Every path into dead, and purge and delete, resolve the dependents of the job they end,
// in its own queue at once and in another through the outbox, by each policy: never stuck.
func TestEveryDeathPathResolvesDependentsByTheirPolicy(t *testing.T) {
	c := setup(t, Config{})
	paths := map[string]func(t *testing.T, q, id string){
		"fail": func(t *testing.T, q, id string) {
			j := claimID(t, c, q, id, time.Minute)
			if st, err := c.broker().Fail(ctx, j, "boom", proto.NoRetry); err != nil || st != StateDead {
				t.Fatalf("Fail() = %s, %v", st, err)
			}
		},
		"reap": func(t *testing.T, q, id string) {
			claimID(t, c, q, id, time.Millisecond)
			time.Sleep(5 * time.Millisecond)
			if n, err := c.broker().Reap(ctx, q); err != nil || n != 1 {
				t.Fatalf("Reap() = %d, %v", n, err)
			}
		},
		"cancel": func(t *testing.T, q, id string) {
			if _, err := c.Cancel(ctx, q, id); err != nil {
				t.Fatal(err)
			}
		},
		"cancel-active": func(t *testing.T, q, id string) {
			j := claimID(t, c, q, id, time.Minute)
			if _, err := c.Cancel(ctx, q, id); err != nil {
				t.Fatal(err)
			}
			if err := c.broker().Ack(ctx, j, nil); err == nil {
				t.Fatal("Ack of a cancelled job err = nil, want ErrCancelled")
			}
		},
		"purge": func(t *testing.T, q, id string) {
			if n, err := c.Purge(ctx, q, StateReady); err != nil || n != 1 {
				t.Fatalf("Purge() = %d, %v", n, err)
			}
		},
		"delete": func(t *testing.T, q, id string) {
			if err := c.Delete(ctx, q, id); err != nil {
				t.Fatal(err)
			}
		},
	}
	n := 0
	for name, kill := range paths {
		for _, across := range []bool{false, true} {
			for _, run := range []bool{false, true} {
				n++
				q := fmt.Sprintf("p%d", n) // a queue of its own: purge takes all its ready jobs
				depQ := q
				if across {
					depQ = q + "-dep"
				}
				dep := mustEnqueue(t, c, "dep", On(depQ), MaxRetry(0))
				opts := []Option{On(q), AfterJob(depQ, dep)}
				if run {
					opts = append(opts, IgnoreDependencyFailure())
				}
				d := mustEnqueue(t, c, "d", opts...)
				kill(t, depQ, dep)
				deliverAll(t, c, depQ)
				want := StateDead
				if run {
					want = StateReady
				}
				j := mustState(t, c, q, d, want)
				if !run && j.LastError != "dependency "+depQ+"/"+dep+" died" {
					t.Errorf("%s (across %v): dependent's last error = %q", name, across, j.LastError)
				}
			}
		}
	}
}

func TestAfterAnEndedOrUnknownDependencyResolvesAtOnce(t *testing.T) {
	c := setup(t, Config{})
	done := mustEnqueue(t, c, "a", On("o"))
	j := claimID(t, c, "o", done, time.Minute)
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "default", mustEnqueue(t, c, "b", AfterJob("o", done)), StateReady)
	d := mustEnqueue(t, c, "b", After("no-such-job"))
	if j := mustState(t, c, "default", d, StateDead); !strings.Contains(j.LastError, "no-such-job died") {
		t.Errorf("dependent of an unknown job: last error %q", j.LastError)
	}
	mustState(t, c, "default", mustEnqueue(t, c, "b", After("no-such-job"), IgnoreDependencyFailure()), StateReady)
	if _, err := c.Enqueue(ctx, "b", nil, After("x"), Delay(time.Second)); err == nil {
		t.Error("After with Delay err = nil, want ErrInvalid")
	}
	if _, err := c.Enqueue(ctx, "b", nil, IgnoreDependencyFailure()); err == nil {
		t.Error("IgnoreDependencyFailure without After err = nil, want ErrInvalid")
	}
}

// A workflow whose client died after writing the dependent and before linking it is
// completed by enqueueing it again with the same ID.
func TestAfterRerunCompletesAHalfWrittenWorkflow(t *testing.T) {
	c := setup(t, Config{})
	dep := mustEnqueue(t, c, "a", On("o"))
	// The client's first step alone: the dependent written waiting, no link.
	p, err := c.prepare(BatchJob{Type: "b", Options: []Option{ID("d1"), AfterJob("o", dep)}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if res := c.enqueuePrepared(ctx, []prepared{p}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	j := claimID(t, c, "o", dep, time.Minute)
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "default", "d1", StateWaiting) // never linked: dep's end missed it
	if _, err := c.Enqueue(ctx, "b", nil, ID("d1"), AfterJob("o", dep)); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("rerun err = %v, want ErrDuplicate (the job exists)", err)
	}
	mustState(t, c, "default", "d1", StateReady)
}

func TestChainRunsEachStepAfterThePrevious(t *testing.T) {
	c := setup(t, Config{})
	steps := Chain(BatchJob{Type: "fetch"}, BatchJob{Type: "transform", Options: []Option{On("cpu")}}, BatchJob{Type: "notify"})
	res, err := c.EnqueueBatch(ctx, steps)
	if err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "cpu", res[1].ID, StateWaiting)
	mustState(t, c, "default", res[2].ID, StateWaiting)
	j := claimID(t, c, "default", res[0].ID, time.Minute)
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	deliverAll(t, c, "default")
	j = claimID(t, c, "cpu", res[1].ID, time.Minute)
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "default", res[2].ID, StateWaiting)
	deliverAll(t, c, "cpu")
	claimID(t, c, "default", res[2].ID, time.Minute)
}

// A chain whose first step dies kills the rest, each followed in turn.
func TestChainDeathCascades(t *testing.T) {
	c := setup(t, Config{})
	res, err := c.EnqueueBatch(ctx, Chain(BatchJob{Type: "a", Options: []Option{MaxRetry(0)}}, BatchJob{Type: "b"},
		BatchJob{Type: "c", Options: []Option{On("o")}}, BatchJob{Type: "d", Options: []Option{On("o")}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "default", res[0].ID); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "default", res[1].ID, StateDead)
	deliverAll(t, c, "default")
	mustState(t, c, "o", res[2].ID, StateDead)
	mustState(t, c, "o", res[3].ID, StateDead)
}

func TestBatchCallbacksFireOnce(t *testing.T) {
	c := setup(t, Config{})
	var jobs []BatchJob
	for i := 0; i < 4; i++ {
		q := "default"
		if i%2 == 1 {
			q = "other"
		}
		jobs = append(jobs, BatchJob{Type: "child", Options: []Option{On(q), MaxRetry(0)}})
	}
	ref, _, err := c.NewBatch(ctx, BatchOptions{Queue: "cb", OnComplete: &Callback{Type: "complete"},
		OnSuccess: &Callback{Type: "success"}, OnDeath: &Callback{Type: "death", Payload: []byte("p")}}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.BatchStatus(ctx, ref)
	if err != nil || st.State != BatchRunning || st.Total != 4 || st.Pending != 4 {
		t.Fatalf("BatchStatus() = %+v, %v", st, err)
	}
	for _, q := range []string{"default", "other"} {
		js, err := c.broker().Claim(ctx, q, 10, time.Minute, "w")
		if err != nil || len(js) != 2 {
			t.Fatalf("Claim(%s) = %d jobs, %v", q, len(js), err)
		}
		if js[0].Batch != ref {
			t.Errorf("child's Batch = %v, want %v", js[0].Batch, ref)
		}
		if err := c.broker().Ack(ctx, js[0], nil); err != nil {
			t.Fatal(err)
		}
		if err := c.broker().Ack(ctx, js[0], nil); err != nil { // resent: counted once
			t.Fatal(err)
		}
		if _, err := c.broker().Fail(ctx, js[1], "no", proto.NoRetry); err != nil {
			t.Fatal(err)
		}
	}
	deliverAll(t, c, "default", "other")
	deliverAll(t, c, "default", "other")
	st, err = c.BatchStatus(ctx, ref)
	if err != nil || st.State != BatchCompleted || st.Total != 4 || st.Pending != 0 || st.Done != 2 || st.Dead != 2 {
		t.Fatalf("BatchStatus() = %+v, %v; want completed 4 = 2 done + 2 dead", st, err)
	}
	if !st.Callbacks["complete"].Fired || !st.Callbacks["death"].Fired || st.Callbacks["success"].Fired {
		t.Errorf("callbacks = %+v, want complete and death fired, success not", st.Callbacks)
	}
	ready, _ := c.List(ctx, "cb", StateReady, 0, 10)
	if len(ready) != 2 {
		t.Fatalf("callback jobs = %d, want 2", len(ready))
	}
	for _, j := range ready {
		if j.Type == "death" && string(j.Payload) != "p" || j.Type == "complete" && !strings.Contains(string(j.Payload), `"dead":2`) {
			t.Errorf("callback %s payload = %s", j.Type, j.Payload)
		}
	}
}

// 1,000 children acked at once by concurrent workers: each callback exactly once.
func TestBatchOfAThousandEndingAtOnce(t *testing.T) {
	c := setup(t, Config{})
	jobs := make([]BatchJob, 1000)
	for i := range jobs {
		jobs[i] = BatchJob{Type: "child"}
	}
	ref, _, err := c.NewBatch(ctx, BatchOptions{OnComplete: &Callback{Type: "complete"},
		OnSuccess: &Callback{Type: "success"}}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	var claimed [][]*Job
	for {
		js, err := c.broker().Claim(ctx, "default", 100, time.Minute, "w")
		if err != nil {
			t.Fatal(err)
		}
		if len(js) == 0 {
			break
		}
		claimed = append(claimed, js)
	}
	var wg sync.WaitGroup
	for _, js := range claimed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results := make([][]byte, len(js))
			if _, _, err := c.broker().AckClaim(ctx, "default", js, results, 0, time.Minute, "w"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, err := c.BatchStatus(ctx, ref)
	if err != nil || st.State != BatchSucceeded || st.Done != 1000 || st.Pending != 0 {
		t.Fatalf("BatchStatus() = %+v, %v", st, err)
	}
	ready, _ := c.List(ctx, "default", StateReady, 0, 10)
	if len(ready) != 2 {
		t.Errorf("jobs ready after the batch = %d, want the 2 callbacks", len(ready))
	}
}

func TestBatchAddFromARunningChild(t *testing.T) {
	c := setup(t, Config{})
	ref, _, err := c.NewBatch(ctx, BatchOptions{OnSuccess: &Callback{Type: "success"}}, []BatchJob{{Type: "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	parent := claimID(t, c, "default", ref.ID+".0", time.Minute)
	res, err := c.BatchAdd(ctx, parent.Batch, []BatchJob{{Type: "more", Options: []Option{ID(parent.ID + ".more"), On("o")}}})
	if err != nil || len(res) != 1 {
		t.Fatalf("BatchAdd() = %v, %v", res, err)
	}
	if err := c.broker().Ack(ctx, parent, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.BatchStatus(ctx, ref); st.State != BatchRunning || st.Total != 2 || st.Pending != 1 {
		t.Fatalf("after the parent: %+v, want running with the added child pending", st)
	}
	more := claimID(t, c, "o", parent.ID+".more", time.Minute)
	if err := c.broker().Ack(ctx, more, nil); err != nil {
		t.Fatal(err)
	}
	deliverAll(t, c, "o")
	if st, _ := c.BatchStatus(ctx, ref); st.State != BatchSucceeded || !st.Callbacks["success"].Fired {
		t.Fatalf("after the added child: %+v, want succeeded", st)
	}
	if _, err := c.BatchAdd(ctx, ref, []BatchJob{{Type: "late"}}); err == nil {
		t.Error("BatchAdd to an ended batch err = nil, want ErrState")
	}
}

// A dependency enqueued in the same call as its dependent is written with the dependent
// registered: it may end at once, its done record deleted (DoneRetention < 0), and the
// dependent is still released.
func TestDependencyOfTheSameCallIsRegisteredAtOnce(t *testing.T) {
	c := setup(t, Config{DoneRetention: -1})
	res, err := c.EnqueueBatch(ctx, Chain(BatchJob{Type: "a"}, BatchJob{Type: "b", Options: []Option{On("o")}}))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.rdb.HGet(ctx, c.keys.queue("default").job(res[0].ID), "dependents").Result(); v != "1" {
		t.Fatalf("dependency's dependents flag = %q, want 1 from its enqueue", v)
	}
	j := claimID(t, c, "default", res[0].ID, time.Minute)
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	deliverAll(t, c, "default")
	mustState(t, c, "o", res[1].ID, StateReady)
}

// Dependents reads a sample of at most max, with their states and the count of all, and
// Dependencies says which dependencies are pending: neither reads a whole set.
func TestDependentsAndDependenciesAreBounded(t *testing.T) {
	c := setup(t, Config{})
	root := mustEnqueue(t, c, "root")
	var kids []BatchJob
	for range 200 {
		kids = append(kids, BatchJob{Type: "kid", Options: []Option{After(root)}})
	}
	if _, err := c.EnqueueBatch(ctx, kids); err != nil {
		t.Fatal(err)
	}
	rj := mustState(t, c, "default", root, StateReady)
	some, total, err := c.Dependents(ctx, rj, 10)
	if err != nil || total != 200 || len(some) != 10 {
		t.Fatalf("Dependents(max 10) = %d of %d, %v; want 10 of 200", len(some), total, err)
	}
	seen := map[string]bool{}
	for i, d := range some {
		if d.State != StateWaiting || seen[d.ID] || i > 0 && some[i-1].String() > d.String() {
			t.Errorf("dependent %d = %+v: want distinct, sorted, waiting", i, d)
		}
		seen[d.ID] = true
	}
	if _, _, err := c.Dependents(ctx, rj, 0); !strings.Contains(fmt.Sprint(err), "max 0") {
		t.Errorf("Dependents(max 0) err = %v, want ErrInvalid naming max", err)
	}
	// One kid that waits on the root and on a job already done: only the root is pending.
	done := mustEnqueue(t, c, "done", On("other"))
	if err := c.broker().Ack(ctx, claimID(t, c, "other", done, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	kid := mustEnqueue(t, c, "kid", AfterJob("other", done), After(root))
	deps, err := c.Dependencies(ctx, mustState(t, c, "default", kid, StateWaiting))
	if err != nil || len(deps) != 2 || deps[0].Pending || !deps[1].Pending || deps[0].State != StateDone {
		t.Errorf("Dependencies() = %+v, %v; want the done one not pending, the root pending", deps, err)
	}
}
