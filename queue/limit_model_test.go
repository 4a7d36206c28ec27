package queue

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A model-based test of the concurrency limit: random claims, acks, fails, hand backs,
// heartbeats, leases running out (a worker that stopped renewing), reaps and cancels on a
// queue with concurrency 4. After every step: unexpired leases never exceed the limit,
// every lease in active belongs to an active job (no orphan), and a lease that ran out is
// never renewed by a late heartbeat.
func TestConcurrencyLimitModel(t *testing.T) {
	c := setup(t, Config{})
	qk := c.keys.queue("default")
	const limit, steps = 4, 2000
	if err := c.SetLimit(ctx, "default", Limit{Concurrency: limit}); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)
	var held []*Job // claimed and not settled, as their workers see them
	enqueueN(t, c, 20, MaxRetry(1000))
	for step := range steps {
		what := modelStep(t, c, rng, &held, func(n int) { enqueueN(t, c, n, MaxRetry(1000)) })
		if what == "" {
			continue
		}
		now := c.rdb.Time(ctx).Val().UnixMilli()
		if n := c.rdb.ZCount(ctx, qk.active, "("+strconv.FormatInt(now, 10), "+inf").Val(); n > limit {
			t.Fatalf("step %d (%s): %d unexpired leases, limit %d", step, what, n, limit)
		}
		for _, id := range c.rdb.ZRange(ctx, qk.active, 0, -1).Val() {
			if st := c.rdb.HGet(ctx, qk.job(id), "state").Val(); st != "active" {
				t.Fatalf("step %d (%s): job %s in active is %q: an orphan lease", step, what, id, st)
			}
		}
	}
}

// modelStep applies one random operation of the limits' model tests to queue "default":
// an enqueue (by enqueue), a claim, an ack with a claim, a fail, a hand back, a lease
// running out (a worker that stalls: its deadline moved into the past, in active and its
// key's lease set), a heartbeat, a reap or a cancel, on the jobs held (claimed and not
// settled, as their workers see them). It returns what it did, "" when it did nothing.
func modelStep(t *testing.T, c *Client, rng *rand.Rand, held *[]*Job, enqueue func(n int)) string {
	t.Helper()
	qk := c.keys.queue("default")
	take := func() *Job {
		i := rng.IntN(len(*held))
		j := (*held)[i]
		*held = append((*held)[:i], (*held)[i+1:]...)
		return j
	}
	var what string
	switch op := rng.IntN(9); {
	case op == 0:
		enqueue(1 + rng.IntN(5))
		what = "enqueue"
	case op <= 2:
		_, jobs, _, err := c.broker().AckClaimLimited(ctx, "default", nil, nil, 1+rng.IntN(6), time.Minute, "w"+strconv.Itoa(rng.IntN(3)))
		if err != nil {
			t.Fatal(err)
		}
		*held = append(*held, jobs...)
		what = fmt.Sprintf("claim: %d", len(jobs))
	case len(*held) == 0:
		return ""
	case op == 3:
		j := take()
		if _, _, _, err := c.broker().AckClaimLimited(ctx, "default", []*Job{j}, [][]byte{nil}, rng.IntN(3), time.Minute, "w"); err != nil {
			t.Fatal(err)
		}
		what = "ack+claim " + j.ID
	case op == 4:
		j := take()
		_, _ = c.broker().Fail(ctx, j, "boom", time.Duration(rng.IntN(2))*time.Millisecond)
		what = "fail " + j.ID
	case op == 5:
		j := take()
		_ = c.broker().HandBack(ctx, j, time.Duration(rng.IntN(2))*time.Millisecond)
		what = "hand back " + j.ID
	case op == 6:
		j := (*held)[rng.IntN(len(*held))]
		c.rdb.ZAddXX(ctx, qk.active, redis.Z{Score: 1, Member: j.ID})
		if j.LimitKey != "" {
			base := qk.jobPrefix[:len(qk.jobPrefix)-len("job:")]
			c.rdb.ZAddXX(ctx, base+"kactive:"+j.LimitKey, redis.Z{Score: 1, Member: j.ID})
		}
		what = "lease ran out " + j.ID
	case op == 7:
		lost, _, err := c.broker().Heartbeat(ctx, "default", time.Minute, *held)
		if err != nil {
			t.Fatal(err)
		}
		keep := (*held)[:0]
		for _, j := range *held {
			gone := false
			for _, l := range lost {
				gone = gone || l == j.Lease
			}
			if !gone {
				keep = append(keep, j)
			}
		}
		*held = keep
		what = fmt.Sprintf("heartbeat: %d lost", len(lost))
	default:
		if rng.IntN(2) == 0 {
			if _, err := c.broker().Reap(ctx, "default"); err != nil {
				t.Fatal(err)
			}
			what = "reap"
		} else {
			j := (*held)[rng.IntN(len(*held))]
			_, _ = c.Cancel(ctx, "default", j.ID)
			what = "cancel " + j.ID
		}
	}
	if rng.IntN(10) == 0 {
		_, _, _ = c.broker().Promote(ctx, "default")
	}
	return what
}
