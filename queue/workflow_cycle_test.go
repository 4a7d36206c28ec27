package queue

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// A job's dependencies are fixed when it is enqueued, so a cycle can only be made by the
// enqueue that writes it: a job naming itself, or the jobs of one call naming each other.
// Such a call is refused whole, before anything is written.
func TestDependencyCyclesAreRefusedWritingNothing(t *testing.T) {
	c := setup(t, Config{})
	if _, err := c.Enqueue(ctx, "s", nil, ID("S"), After("S")); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "default/S -> default/S") {
		t.Errorf("Enqueue(ID S, After S) err = %v, want ErrInvalid naming the cycle default/S -> default/S", err)
	}
	if _, err := c.Enqueue(ctx, "s", nil, ID("S2"), On("a"), AfterJob("a", "S2")); !errors.Is(err, ErrInvalid) {
		t.Errorf("Enqueue(ID S2, AfterJob same queue S2) err = %v, want ErrInvalid", err)
	}
	cases := []struct {
		name string
		jobs []BatchJob
		want string // the cycle named in the error
	}{
		{"two jobs", []BatchJob{
			{Type: "a", Options: []Option{ID("A"), After("B")}},
			{Type: "b", Options: []Option{ID("B"), After("A")}},
		}, "default/A -> default/B -> default/A"},
		{"three jobs across queues, after a good one", []BatchJob{
			{Type: "x", Options: []Option{ID("X")}},
			{Type: "c", Options: []Option{ID("C"), On("q2"), AfterJob("default", "D")}},
			{Type: "d", Options: []Option{ID("D"), After("E", "X")}},
			{Type: "e", Options: []Option{ID("E"), AfterJob("q2", "C")}},
		}, "q2/C -> default/D -> default/E -> q2/C"},
		{"self in a batch", []BatchJob{
			{Type: "f", Options: []Option{ID("F"), After("F")}},
		}, "default/F -> default/F"},
	}
	for _, tc := range cases {
		res, err := c.EnqueueBatch(ctx, tc.jobs)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || res != nil {
			t.Errorf("%s: EnqueueBatch = %v, %v; want ErrInvalid naming %s", tc.name, res, err, tc.want)
		}
		for _, j := range tc.jobs {
			o, _ := resolve(j.Options)
			if _, err := c.Get(ctx, o.queue, o.id); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: Get(%s/%s) err = %v, want ErrNotFound: a refused call writes nothing", tc.name, o.queue, o.id, err)
			}
		}
	}
	// A diamond is no cycle: D waits on B and C, both on A.
	res, err := c.EnqueueBatch(ctx, []BatchJob{
		{Type: "d", Options: []Option{ID("D1"), After("B1", "C1")}},
		{Type: "b", Options: []Option{ID("B1"), After("A1")}},
		{Type: "c", Options: []Option{ID("C1"), After("A1")}},
		{Type: "a", Options: []Option{ID("A1")}},
	})
	if err != nil || len(res) != 4 {
		t.Fatalf("EnqueueBatch(diamond) = %v, %v; want 4 jobs enqueued", res, err)
	}
	mustState(t, c, "default", "D1", StateWaiting)
	mustState(t, c, "default", "A1", StateReady)
}

// Across calls a cycle can still close: a job is written (waiting) before its edges are
// linked, so two calls with caller-chosen IDs racing (A after B, B after A), or an
// interrupted enqueue completed later, can each find the other waiting. The link that
// closes it finds its dependency waiting, walks what that one waits on, meets the job it
// links, and resolves its edge as a cycle: the job dies with that error, and the rest of
// the cycle dies of it (their dependency died). Nothing waits forever.
func TestDependencyCycleAcrossCallsEndsDead(t *testing.T) {
	for _, tc := range []struct{ name, qa, qb string }{
		{"one queue", "default", "default"},
		{"two queues", "qa", "qb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := setup(t, Config{})
			// A is written, its link not made yet: the first call of the race, or one
			// whose client died between the steps.
			a, err := c.prepare(BatchJob{Type: "a", Options: []Option{ID("A"), On(tc.qa), AfterJob(tc.qb, "B")}}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			res := c.enqueuePrepared(ctx, []prepared{a})
			if res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
			// B after A: its link finds A waiting, on B.
			if _, err := c.Enqueue(ctx, "b", nil, ID("B"), On(tc.qb), AfterJob(tc.qa, "A")); err != nil {
				t.Fatalf("Enqueue(B after A) err = %v", err)
			}
			c.link(ctx, []prepared{a}, res, nil) // A's call goes on (or is run again)
			if res[0].Err != nil {
				t.Fatalf("link(A) err = %v", res[0].Err)
			}
			deliverAll(t, c, tc.qa, tc.qb)
			jb := mustState(t, c, tc.qb, "B", StateDead)
			if !strings.Contains(jb.LastError, "dependency cycle") {
				t.Errorf("B's last error = %q, want it to say dependency cycle", jb.LastError)
			}
			ja := mustState(t, c, tc.qa, "A", StateDead)
			if ja.LastError == "" {
				t.Errorf("A dead without an error")
			}
		})
	}
}

// A chain built one enqueue at a time, each step after the one before while that one
// waits, does not walk the whole chain at every step: the cycle check stops after
// cycleWalkLevels levels, so 200 steps cost at most 200 x 32 pending-set reads, not the
// 19,900 a walk to the chain's head at every step would.
func TestCycleCheckOfALongChainIsBounded(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("counts the calls of a redis-server of its own")
	}
	t.Parallel()
	srv := redistest.Own(t)
	rdb := srv.Client(t)
	c, err := NewClient(rdb, Config{Prefix: "chain"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	prev, err := c.Enqueue(ctx, "step", nil, Delay(time.Hour)) // the head waits: every step after it waits too
	if err != nil {
		t.Fatal(err)
	}
	rdb.ConfigResetStat(ctx)
	for range n {
		if prev, err = c.Enqueue(ctx, "step", nil, After(prev)); err != nil {
			t.Fatal(err)
		}
	}
	var reads int
	for _, line := range strings.Split(rdb.Info(ctx, "commandstats").Val(), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_smembers:calls="); ok {
			reads, _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		}
	}
	if reads > n*cycleWalkLevels {
		t.Errorf("%d pending-set reads for a chain of %d built step by step, want at most %d", reads, n, n*cycleWalkLevels)
	}
	j, err := c.Get(ctx, DefaultQueue, prev)
	if err != nil || j.State != StateWaiting {
		t.Errorf("the chain's last job: %+v, %v; want it waiting", j, err)
	}
}
