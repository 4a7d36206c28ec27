package queue

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// The master holding a dependent and a batch dies while the ends of their jobs, on
// another master, are being delivered: the deliveries fail and stay in the outbox; once
// the master is back (restarted on its append-only file), the next delivery resolves
// each exactly once, and later ones change nothing. (A replica's failover is not
// staged here: redistest's clusters have no replicas.)
func TestOutboxDeliveryOutlivesATargetMasterDown(t *testing.T) {
	if testing.Short() || redistest.ClusterMode() {
		t.Skip("starts its own cluster")
	}
	t.Parallel()
	cl, err := redistest.StartCluster(3, "--appendonly", "yes", "--appendfsync", "always",
		"--cluster-require-full-coverage", "no")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	rdb := cl.Client(t)
	// Two queues on two different masters.
	//lint:ignore SA1019 CLUSTER SLOTS answers on Redis 6 too; CLUSTER SHARDS needs Redis 7
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	nodeOf := func(q string) string {
		slot, err := rdb.ClusterKeySlot(ctx, "{"+q+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) {
				return s.Nodes[0].Addr
			}
		}
		t.Fatalf("no master serves the slot of %s", q)
		return ""
	}
	src, dst := "src", ""
	for i := 0; dst == ""; i++ {
		if q := fmt.Sprintf("dst%d", i); nodeOf(q) != nodeOf(src) {
			dst = q
		}
	}
	c, err := NewClient(rdb, Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	dep := mustEnqueue(t, c, "a", On(src))
	d := mustEnqueue(t, c, "b", On(dst), AfterJob(src, dep))
	ref, _, err := c.NewBatch(ctx, BatchOptions{Queue: dst, OnSuccess: &Callback{Type: "cb"}},
		[]BatchJob{{Type: "child", Options: []Option{On(src)}}})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.broker().Claim(ctx, src, 5, time.Minute, "w")
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Claim(%s) = %v, %v", src, jobs, err)
	}
	var down *redistest.Server
	for _, s := range cl.Servers {
		if s.Addr == nodeOf(dst) {
			down = s
		}
	}
	down.Kill()
	for _, j := range jobs {
		if err := c.broker().Ack(ctx, j, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := c.broker().Deliver(ctx, src); err == nil || n != 0 {
		t.Fatalf("Deliver with the target's master down = %d, %v; want an error, nothing delivered", n, err)
	}
	if n, _ := rdb.HLen(ctx, c.keys.queue(src).outbox).Result(); n != 2 {
		t.Fatalf("outbox holds %d entries after the failed delivery, want both", n)
	}
	if err := down.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := c.broker().Deliver(ctx, src)
		if err == nil && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Deliver after the restart = %d, %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	mustState(t, c, dst, d, StateReady)
	st, err := c.BatchStatus(ctx, ref)
	if err != nil || st.State != BatchSucceeded || st.Done != 1 || !st.Callbacks["success"].Fired {
		t.Fatalf("batch = %+v, %v; want succeeded, its callback fired", st, err)
	}
	// The same resolutions delivered again (an entry whose HDEL was lost) change nothing.
	for _, call := range []*scriptCall{c.resolveCall("j", JobRef{dst, d}, "done", JobRef{src, dep}),
		c.resolveCall("b", JobRef{dst, ref.ID}, "done", JobRef{src, jobs[1].ID}, JobRef{src, jobs[0].ID})} {
		c.runScripts(ctx, nil, []*scriptCall{call})
		if err := call.cmd.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := c.BatchStatus(ctx, ref); st.Done != 1 || st.Total != 1 {
		t.Errorf("batch after repeated deliveries = %+v, want done 1 of 1", st)
	}
	if n, _ := c.rdb.LLen(ctx, c.keys.queue(dst).ready).Result(); n != 2 {
		t.Errorf("%d jobs ready on %s, want the dependent and the callback once each", n, dst)
	}
}

// The master holding a dependent and a batch fails over to its replica (CLUSTER
// FAILOVER) while the ends of their jobs, on another master, are being delivered: each
// resolves exactly once, on whichever node holds the slot when its delivery lands.
func TestOutboxDeliveryThroughAFailover(t *testing.T) {
	if testing.Short() || redistest.ClusterMode() {
		t.Skip("starts its own cluster")
	}
	t.Parallel()
	cl, err := redistest.StartClusterWithReplicas(3, "--cluster-require-full-coverage", "no")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	rdb := cl.Client(t)
	// The replicas show in CLUSTER SLOTS once they have joined their masters.
	var slots []redis.ClusterSlot
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		//lint:ignore SA1019 CLUSTER SLOTS answers on Redis 6 too; CLUSTER SHARDS needs Redis 7
		slots, err = rdb.ClusterSlots(ctx).Result()
		if err == nil && !slices.ContainsFunc(slots, func(s redis.ClusterSlot) bool { return len(s.Nodes) < 2 }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas not listed within 20s: %v %v", slots, err)
		}
	}
	nodesOf := func(q string) (master, replica string) {
		slot, err := rdb.ClusterKeySlot(ctx, "{"+q+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 1 {
				return s.Nodes[0].Addr, s.Nodes[1].Addr
			}
		}
		t.Fatalf("no master with a replica serves the slot of %s", q)
		return "", ""
	}
	src, dst := "src", ""
	srcMaster, _ := nodesOf(src)
	for i := 0; dst == ""; i++ {
		if m, _ := nodesOf(fmt.Sprintf("dst%d", i)); m != srcMaster {
			dst = fmt.Sprintf("dst%d", i)
		}
	}
	c, err := NewClient(rdb, Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	deps := make([]string, n)
	var children []BatchJob
	for i := range deps {
		deps[i] = mustEnqueue(t, c, "a", On(src))
		children = append(children, BatchJob{Type: "child", Options: []Option{On(src)}})
	}
	dependents := make([]string, n)
	for i, dep := range deps {
		dependents[i] = mustEnqueue(t, c, "b", On(dst), AfterJob(src, dep))
	}
	ref, _, err := c.NewBatch(ctx, BatchOptions{Queue: dst, OnSuccess: &Callback{Type: "cb"}}, children)
	if err != nil {
		t.Fatal(err)
	}
	for acked := 0; acked < 2*n; {
		jobs, err := c.broker().Claim(ctx, src, 100, time.Minute, "w")
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if err := c.broker().Ack(ctx, j, nil); err != nil {
				t.Fatal(err)
			}
		}
		acked += len(jobs)
	}
	// The outbox's entries as resolutions, delivered over and over (as workers whose
	// replies were lost would) from the moment the failover is asked until after it.
	entries, err := c.rdb.HGetAll(ctx, c.keys.queue(src).outbox).Result()
	if err != nil || len(entries) != 2*n {
		t.Fatalf("outbox = %d entries, %v; want %d", len(entries), err, 2*n)
	}
	var calls []*scriptCall
	for field, outcome := range entries {
		var kind, q, target, source string
		if parts := strings.Split(field, "\t"); len(parts) == 4 {
			kind, q, target, source = parts[0], parts[1], parts[2], parts[3]
		}
		calls = append(calls, c.resolveCall(kind, JobRef{q, target}, outcome, JobRef{src, source}))
	}
	_, replica := nodesOf(dst)
	rc := redis.NewClient(&redis.Options{Addr: replica})
	defer rc.Close()
	deliver := func() (failed int) {
		for _, call := range calls {
			c.runScripts(ctx, nil, []*scriptCall{call})
			if call.cmd.Err() != nil {
				failed++
			}
		}
		return failed
	}
	if err := rc.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		t.Fatal(err)
	}
	failures, rounds := 0, 0
	for deadline := time.Now().Add(30 * time.Second); ; {
		failures += deliver()
		rounds++
		if role, _ := rc.Do(ctx, "ROLE").Slice(); len(role) > 0 && role[0] == "master" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not take over within 30s")
		}
	}
	time.Sleep(200 * time.Millisecond) // the client learns the new master (MOVED)
	for deadline := time.Now().Add(10 * time.Second); deliver() > 0; {
		if time.Now().After(deadline) {
			t.Fatal("deliveries still fail 10s after the failover")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, d := range dependents {
		mustState(t, c, dst, d, StateReady)
	}
	st, err := c.BatchStatus(ctx, ref)
	if err != nil || st.State != BatchSucceeded || st.Done != n || st.Total != n || !st.Callbacks["success"].Fired {
		t.Fatalf("batch = %+v, %v; want succeeded, %d done, its callback fired", st, err, n)
	}
	if got, _ := c.rdb.LLen(ctx, c.keys.queue(dst).ready).Result(); got != n+1 {
		t.Errorf("%d jobs ready on %s, want the %d dependents and the callback once each", got, dst, n)
	}
	t.Logf("FIGURES failover: %d dependents and a batch of %d across slots resolved once through a failover of their master "+
		"(%d rounds of all %d resolutions, one call at a time, from the FAILOVER to the replica's promotion; %d calls failed and were retried)", n, n, rounds, len(calls), failures)
}
