package queue

import (
	"fmt"
	"testing"
	"time"

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
