package queue

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/scripts"
)

// failDead claims the one ready job id of q and fails it for good.
func failDead(t *testing.T, c *Client, q, id string) {
	t.Helper()
	j := claimID(t, c, q, id, time.Minute)
	if st, err := c.broker().Fail(ctx, j, "boom", proto.NoRetry); err != nil || st != StateDead {
		t.Fatalf("Fail(%s/%s) = %s, %v; want dead", q, id, st, err)
	}
}

// deadPair enqueues A in qa and B in qb after it, fails A for good and returns them
// with B dead of it.
func deadPair(t *testing.T, c *Client, qa, qb string, opts ...Option) (a, b string) {
	t.Helper()
	a = mustEnqueue(t, c, "a", On(qa), MaxRetry(0))
	b = mustEnqueue(t, c, "b", append([]Option{On(qb), AfterJob(qa, a)}, opts...)...)
	failDead(t, c, qa, a)
	deliverAll(t, c, qa)
	mustState(t, c, qb, b, StateDead)
	return a, b
}

// A dependent retried while its dependency is still dead waits for it (the dependency's
// death removed it from the pending set, and ended its dependents set): it runs only once
// the operator retried the dependency and it succeeded, and dies again when the
// dependency dies again. In one queue and across two (two slots on a cluster).
func TestRetryOfADependentWaitsForItsDeadDependency(t *testing.T) {
	c := setup(t, Config{})
	for _, across := range []bool{false, true} {
		qa, qb := fmt.Sprintf("wa%v", across), fmt.Sprintf("wa%v", across)
		if across {
			qb += "-b"
		}
		a, b := deadPair(t, c, qa, qb)

		if err := c.Retry(ctx, qb, b); err != nil {
			t.Fatalf("Retry(%s) err = %v", b, err)
		}
		j := mustState(t, c, qb, b, StateWaiting)
		deps, err := c.Dependencies(ctx, j)
		if err != nil || len(deps) != 1 || !deps[0].Pending || deps[0].State != StateDead {
			t.Fatalf("Dependencies(%s) = %+v, %v; want its dead dependency pending", b, deps, err)
		}
		if got, n, err := c.Dependents(ctx, mustState(t, c, qa, a, StateDead), 10); err != nil || n != 1 || got[0].ID != b {
			t.Fatalf("Dependents(dead %s) = %+v, %d, %v; want %s", a, got, n, err, b)
		}

		// The dependency dies again: so does the dependent.
		if err := c.Retry(ctx, qa, a); err != nil {
			t.Fatal(err)
		}
		mustState(t, c, qb, b, StateWaiting)
		failDead(t, c, qa, a)
		deliverAll(t, c, qa)
		if j := mustState(t, c, qb, b, StateDead); j.LastError != "dependency "+qa+"/"+a+" died" {
			t.Errorf("across %v: dependent's last error = %q", across, j.LastError)
		}

		// Both retried, dependent first: it runs once the dependency is done.
		if err := c.Retry(ctx, qb, b); err != nil {
			t.Fatal(err)
		}
		if err := c.Retry(ctx, qa, a); err != nil {
			t.Fatal(err)
		}
		mustState(t, c, qb, b, StateWaiting)
		if err := c.broker().Ack(ctx, claimID(t, c, qa, a, time.Minute), []byte("ok")); err != nil {
			t.Fatal(err)
		}
		deliverAll(t, c, qa)
		mustState(t, c, qb, b, StateReady)
		claimID(t, c, qb, b, time.Minute)
	}
}

// RetryAllDead of a dead chain S1 -> S2 -> S3 puts back S1 ready and S2, S3 waiting, in
// whatever order the dead set lists them: each step becomes ready only when the one
// before is done.
func TestRetryAllDeadOfAChainKeepsItsOrder(t *testing.T) {
	c := setup(t, Config{})
	s1 := mustEnqueue(t, c, "s", On("ch"), MaxRetry(0))
	s2 := mustEnqueue(t, c, "s", On("ch"), After(s1))
	s3 := mustEnqueue(t, c, "s", On("ch"), After(s2))
	failDead(t, c, "ch", s1)
	mustState(t, c, "ch", s3, StateDead)
	if n, err := c.RetryAllDead(ctx, "ch"); n != 3 || err != nil {
		t.Fatalf("RetryAllDead() = %d, %v; want 3", n, err)
	}
	mustState(t, c, "ch", s2, StateWaiting)
	mustState(t, c, "ch", s3, StateWaiting)
	for _, id := range []string{s1, s2, s3} {
		if err := c.broker().Ack(ctx, claimID(t, c, "ch", id, time.Minute), nil); err != nil {
			t.Fatal(err)
		}
	}
	mustState(t, c, "ch", s3, StateDone)
}

// How a retried dependent stands with each kind of dependency: done ones are not waited
// for; under IgnoreDependencyFailure a dead one is not either; one whose record is gone
// counts as dead, as at enqueue (nothing shows it succeeded), unless the dependent ran
// before: it ran only once its dependencies had succeeded, and a done job stays done.
func TestRetryOfADependentByItsDependencies(t *testing.T) {
	c := setup(t, Config{})

	// Dependencies done, the dependent cancelled while ready: ready at once.
	d := mustEnqueue(t, c, "d", On("k1"))
	if err := c.broker().Ack(ctx, claimID(t, c, "k1", d, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	x := mustEnqueue(t, c, "x", On("k1"), After(d))
	if _, err := c.Cancel(ctx, "k1", x); err != nil {
		t.Fatal(err)
	}
	if err := c.Retry(ctx, "k1", x); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "k1", x, StateReady)

	// Policy run: the dead dependency is not waited for.
	a := mustEnqueue(t, c, "a", On("k2"), MaxRetry(0))
	b := mustEnqueue(t, c, "b", On("k2"), After(a), IgnoreDependencyFailure())
	if _, err := c.Cancel(ctx, "k2", b); err != nil {
		t.Fatal(err)
	}
	failDead(t, c, "k2", a)
	if err := c.Retry(ctx, "k2", b); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "k2", b, StateReady)

	// A dependency gone (its record expired): the dependent that never ran dies again.
	a, b = deadPair(t, c, "k3", "k3-b")
	if err := c.rdb.Del(ctx, c.queueKeys("k3").job(a)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Retry(ctx, "k3-b", b); err != nil {
		t.Fatal(err)
	}
	if j := mustState(t, c, "k3-b", b, StateDead); j.LastError != "dependency k3/"+a+" died" {
		t.Errorf("dependent of a gone dependency: last error = %q", j.LastError)
	}

	// One that ran and failed on its own, its dependency's done record gone: ready.
	d = mustEnqueue(t, c, "d", On("k4"))
	if err := c.broker().Ack(ctx, claimID(t, c, "k4", d, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	y := mustEnqueue(t, c, "y", On("k4"), After(d), MaxRetry(0))
	failDead(t, c, "k4", y)
	if err := c.rdb.Del(ctx, c.queueKeys("k4").job(d)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Retry(ctx, "k4", y); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "k4", y, StateReady)
}

// A dead dependency a retried dependent waits on outlives its retention (nothing would
// resolve the dependent if it expired unseen), and every way it goes resolves the
// dependent as dead: a purge, a delete, a trim of the dead set.
func TestRetriedDependentDiesWhenItsDeadDependencyGoes(t *testing.T) {
	c := setup(t, Config{DeadMax: 2})
	ends := map[string]func(q, a string){
		"purge": func(q, a string) {
			if n, err := c.Purge(ctx, q, StateDead); err != nil || n != 1 {
				t.Fatalf("Purge(dead) = %d, %v", n, err)
			}
		},
		"delete": func(q, a string) {
			if err := c.Delete(ctx, q, a); err != nil {
				t.Fatal(err)
			}
		},
		"trim": func(q, a string) { // two more deaths: a is the oldest past DeadMax
			for _, z := range []string{"~z1", "~z2"} {
				failDead(t, c, q, mustEnqueue(t, c, "z", On(q), MaxRetry(0), ID(z)))
			}
		},
	}
	for name, end := range ends {
		for _, across := range []bool{false, true} {
			qa, qb := "g-"+name, "g-"+name
			if across {
				qa, qb = qa+"-a", qb+"-b"
			}
			// The dead set orders deaths of one millisecond by ID: these IDs keep the
			// order of the deaths, a's (generated) first, so the trim drops a, not b.
			a, b := deadPair(t, c, qa, qb, ID("~~b"))
			if err := c.Retry(ctx, qb, b); err != nil {
				t.Fatal(err)
			}
			mustState(t, c, qb, b, StateWaiting)
			if ttl, err := c.rdb.PTTL(ctx, c.queueKeys(qa).job(a)).Result(); err != nil || ttl != -1 {
				t.Errorf("%s: dead dependency's TTL = %v, %v; want none while a dependent waits", name, ttl, err)
			}
			end(qa, a)
			deliverAll(t, c, qa)
			if j := mustState(t, c, qb, b, StateDead); j.LastError != "dependency "+qa+"/"+a+" died" {
				t.Errorf("%s (across %v): dependent's last error = %q", name, across, j.LastError)
			}
		}
	}
}

// A retry makes a job due now: the run_at of its delay (or of its retry's backoff) goes,
// so it is not shown as due later.
func TestRetryClearsAStaleRunAt(t *testing.T) {
	c := setup(t, Config{})
	id := mustEnqueue(t, c, "d", Delay(time.Hour))
	if _, err := c.Cancel(ctx, "default", id); err != nil {
		t.Fatal(err)
	}
	if err := c.Retry(ctx, "default", id); err != nil {
		t.Fatal(err)
	}
	if j := mustState(t, c, "default", id, StateReady); !j.RunAt.IsZero() {
		t.Errorf("RunAt after a retry to ready = %s, want none", j.RunAt)
	}
	later := mustEnqueue(t, c, "d", Delay(time.Hour))
	if err := c.Retry(ctx, "default", later); err != nil { // scheduled -> ready
		t.Fatal(err)
	}
	if j := mustState(t, c, "default", later, StateReady); !j.RunAt.IsZero() {
		t.Errorf("RunAt after a retry of a scheduled job = %s, want none", j.RunAt)
	}
}

// A retry whose links are lost says so (ErrUncertain): the job waits on a dependency
// that does not know it, and cancelling and retrying it again completes the link.
func TestRetryWithItsLinkLostIsUncertainAndCompletedByRetryingAgain(t *testing.T) {
	c, p := proxied(t)
	a, b := deadPair(t, c, "u", "u")
	linked := func() int {
		_, n, err := c.Dependents(ctx, mustState(t, c, "u", a, StateDead), 10)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	p.CutBeforeRequest([]byte(scripts.Link.Hash()))
	if err := c.Retry(ctx, "u", b); !errors.Is(err, ErrUncertain) {
		t.Fatalf("Retry(%s) with its link cut: err = %v, want ErrUncertain", b, err)
	}
	mustState(t, c, "u", b, StateWaiting)
	if n := linked(); n != 0 {
		t.Fatalf("dead dependency has %d dependents after a cut link, want 0", n)
	}
	if _, err := c.Cancel(ctx, "u", b); err != nil {
		t.Fatal(err)
	}
	if err := c.Retry(ctx, "u", b); err != nil {
		t.Fatal(err)
	}
	if n := linked(); n != 1 {
		t.Fatalf("dead dependency has %d dependents after the retry again, want 1", n)
	}
	if err := c.Retry(ctx, "u", a); err != nil {
		t.Fatal(err)
	}
	if err := c.broker().Ack(ctx, claimID(t, c, "u", a, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	mustState(t, c, "u", b, StateReady)
}
