package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
)

// queuesOnDistinctNodes returns n queue names whose keys live on n different masters.
func queuesOnDistinctNodes(t *testing.T, c *Client, n int) []string {
	t.Helper()
	cc := c.rdb.(*redis.ClusterClient)
	seen := map[string]bool{}
	var qs []string
	for i := 0; len(qs) < n && i < 1000; i++ {
		q := fmt.Sprintf("q%d", i)
		node, err := cc.MasterForKey(ctx, c.keys.queue(q).wake)
		if err != nil {
			t.Fatal(err)
		}
		if addr := node.Options().Addr; !seen[addr] {
			seen[addr] = true
			qs = append(qs, q)
		}
	}
	if len(qs) < n {
		t.Fatalf("found queues on only %d masters", len(qs))
	}
	return qs
}

// On a cluster, one Wait covers queues on different nodes (one BLPOP per queue), wakes
// at once whichever gets a job, and loses no token: one its leftover BLPOPs pop after it
// returned goes back on the wake list for another worker.
func TestClusterWaitAcrossNodes(t *testing.T) {
	if !redistest.ClusterMode() {
		t.Skip("runs on a Redis Cluster: JOBS_TEST_CLUSTER=1 (make test runs it)")
	}
	c := setup(t, Config{})
	qs := queuesOnDistinctNodes(t, c, 3)

	for _, target := range qs {
		done := make(chan [2]string, 1)
		go func() {
			q, token, err := c.broker().Wait(ctx, qs, time.Second)
			if err != nil {
				t.Error(err)
			}
			done <- [2]string{q, token}
		}()
		time.Sleep(50 * time.Millisecond)
		mustEnqueue(t, c, "a", On(target))
		sent := time.Now()
		select {
		case got := <-done:
			if got != [2]string{target, proto.WakeReady} {
				t.Errorf("Wait(%v) = %v after an enqueue on %s", qs, got, target)
			}
			if d := time.Since(sent); d > 300*time.Millisecond {
				t.Errorf("woken %s after the enqueue on %s, want at once", d, target)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("Wait(%v) not woken by an enqueue on %s", qs, target)
		}
	}

	// The BLPOPs on the other queues still run for up to proto.MaxWait: a token they pop now
	// must be handed back, not swallowed.
	mustEnqueue(t, c, "a", On(qs[1]))
	deadline := time.Now().Add(3 * time.Second)
	for c.rdb.LLen(ctx, c.keys.queue(qs[1]).wake).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the wake token of %s was swallowed by a BLPOP no Wait wanted", qs[1])
		}
		time.Sleep(20 * time.Millisecond)
	}
	q, token, err := c.broker().Wait(ctx, qs, time.Second)
	if err != nil || q != qs[1] || token != proto.WakeReady {
		t.Fatalf("Wait after handback = %q, %q, %v; want %q, %q", q, token, err, qs[1], proto.WakeReady)
	}

	// A Wait with nothing to wake it times out on time.
	start := time.Now()
	if q, token, err := c.broker().Wait(ctx, qs, 200*time.Millisecond); q != "" || token != "" || err != nil {
		t.Fatalf("Wait(empty) = %q, %q, %v; want a timeout", q, token, err)
	}
	if d := time.Since(start); d < 190*time.Millisecond || d > 700*time.Millisecond {
		t.Errorf("Wait(200ms) took %s", d)
	}
}

// On a cluster, each queue's limits live in its own slot with its other keys: limits on
// queues of three masters apply to each queue's claims, and Limits reads them all in one
// pipelined round trip.
func TestClusterLimits(t *testing.T) {
	if !redistest.ClusterMode() {
		t.Skip("runs on a Redis Cluster: JOBS_TEST_CLUSTER=1 (make test runs it)")
	}
	c := setup(t, Config{})
	qs := queuesOnDistinctNodes(t, c, 3)
	for i, q := range qs {
		if err := c.SetLimit(ctx, q, Limit{Concurrency: i + 1}); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			mustEnqueue(t, c, "a", On(q))
		}
		_, jobs, lim, err := c.broker().AckClaimLimited(ctx, q, nil, nil, 5, time.Minute, "w")
		if err != nil || len(jobs) != i+1 || lim.By != proto.LimitConcurrency {
			t.Errorf("claim on %s under concurrency %d = %d jobs, %+v, %v", q, i+1, len(jobs), lim, err)
		}
	}
	ls, err := c.Limits(ctx, qs...)
	if err != nil || len(ls) != 3 {
		t.Fatalf("Limits() = %+v, %v", ls, err)
	}
	for i, s := range ls {
		if s.Queue != qs[i] || s.Concurrency != i+1 || s.Running != i+1 || s.Waiting() != ConcurrencyLimit {
			t.Errorf("Limits()[%d] = %+v, want %s at its limit %d", i, s, qs[i], i+1)
		}
	}
}

// A Wait on many more queues than the cluster client's pool has connections (one BLPOP
// per queue, each blocking up to a second) must not starve the client's other commands,
// nor delay the wake of the queue that gets a job: the BLPOPs run on connections of
// their own. With them on the shared pool (2 connections per node here), an enqueue
// waited for a connection a BLPOP held, and the target queue's BLPOP waited its turn
// behind 60 others.
func TestClusterWaitOnManyQueuesLeavesThePoolFree(t *testing.T) {
	if !redistest.ClusterMode() {
		t.Skip("runs on a Redis Cluster: JOBS_TEST_CLUSTER=1 (make test runs it)")
	}
	t.Parallel()
	rdb := redistest.ClusterClientWithPool(t, 2)
	c, err := NewClient(rdb, Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	qs := make([]string, 60)
	for i := range qs {
		qs[i] = fmt.Sprintf("many%d", i)
	}
	for round := range 3 {
		target := qs[len(qs)-1-round*7]
		done := make(chan [2]string, 1)
		go func() {
			q, token, err := c.broker().Wait(ctx, qs, 3*time.Second)
			if err != nil {
				t.Error(err)
			}
			done <- [2]string{q, token}
		}()
		time.Sleep(100 * time.Millisecond) // the BLPOPs are blocked
		sent := time.Now()
		mustEnqueue(t, c, "a", On(target))
		if d := time.Since(sent); d > 300*time.Millisecond {
			t.Errorf("round %d: the enqueue took %s beside the Wait's BLPOPs, want well under 300ms", round, d)
		}
		select {
		case got := <-done:
			if got != [2]string{target, proto.WakeReady} {
				t.Errorf("round %d: Wait = %v after an enqueue on %s", round, got, target)
			}
			if d := time.Since(sent); d > 500*time.Millisecond {
				t.Errorf("round %d: woken %s after the enqueue on %s, want at once", round, d, target)
			}
		case <-time.After(4 * time.Second):
			t.Fatalf("round %d: Wait not woken by an enqueue on %s", round, target)
		}
	}
}
