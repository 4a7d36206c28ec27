package worker

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// The rate tests check what the docs promise: the starts (their token instants, by
// Redis's clock) in any window of one period never exceed rate + burst - 1, and a
// binding rate is delivered in full. The first holds exactly whatever the machine does.
// The second is not the product's alone: a worker that met the rate is told to claim
// again when the next token is 20ms (rate_ahead) from due, and GCRA gives no lost time
// back, so when every claim for a token reaches Redis after the token is due, the time
// past it is lost. On a machine loaded past its 2 cores (-race, load 8 to 13) the test
// process's timers, or Redis, or the replies between them, stall for 20 to 250ms now and
// then, and a 10s run lost up to 400ms that way (19.19/s). So claimTimer measures, by
// Redis's clock, how late each claim came against the time Redis asked for it, and
// rateKept leaves out of the mean the time a token was lost by at most the lateness of
// the claim that took it past the token's due time: Redis asks for the claim rateAhead
// before that, so a claim late by L loses L - rateAhead at most. What remains, tokens
// lost while the claims came when asked, is the product's, held to the 2% of issue 16;
// the time left out must stay under a tenth of the run (a product that makes its claims
// late, a busy Redis say, would look like a loaded machine); and the workers' own timers
// must be late by less than rateAhead in the median, or the time left out would be theirs.

// rateAhead is how long before a token is due a claim may take it: rate_ahead() in
// scripts/lib/keys.lua.
const rateAhead = 20 * time.Millisecond

// startTimedWorker is startWorker for a worker whose claims rec times.
func startTimedWorker(t *testing.T, c *queue.Client, cfg Config, rec *claimLateness) (stop func()) {
	t.Helper()
	w, err := New(c, cfg)
	if err != nil {
		t.Fatalf("New() err = %v", err)
	}
	rec.timeClaims(w)
	return runWorker(t, w)
}

// claimTimer is a worker's broker that times the worker's claims after a reply of its
// queue's rate ("claim again in Wait"): how late each came to Redis against the time
// asked (its Redis time against the last reply's plus Wait, both by Redis's clock), and
// how late the worker sent it (by its monotonic clock, against its last call's sending
// plus Wait, which is when the worker means to send it: a late timer, or a late reply).
type claimTimer struct {
	broker.Broker
	rec *claimLateness
	due *time.Time // when the worker's last claim the rate cut short was sent, + Wait; zero: none
	ask *time.Time // that claim's Redis time + Wait: when Redis asked for the next
}

// claimLateness gathers the claimTimers of one test.
type claimLateness struct {
	mu    sync.Mutex
	late  map[int64]time.Duration // a start instant (µs, Redis's clock): how late its claim came (-1: not asked for)
	sends []time.Duration         // how late the workers sent each claim asked for
}

// timeClaims wraps w's broker in a claimTimer recording into rec.
func (rec *claimLateness) timeClaims(w *Worker) {
	rec.mu.Lock()
	if rec.late == nil {
		rec.late = map[int64]time.Duration{}
	}
	rec.mu.Unlock()
	w.broker = claimTimer{Broker: w.broker, rec: rec, due: new(time.Time), ask: new(time.Time)}
}

func (c claimTimer) AckClaimWaiting(ctx context.Context, q string, finished []*queue.Job, results [][]byte, n int,
	lease time.Duration, worker string, w *proto.Waiter) ([]error, []*queue.Job, proto.Limited, bool, error) {
	called := time.Now()
	acked, jobs, lim, registered, err := c.Broker.AckClaimWaiting(ctx, q, finished, results, n, lease, worker, w)
	if n == 0 || err != nil {
		return acked, jobs, lim, registered, err
	}
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	late := time.Duration(-1)
	if !c.due.IsZero() {
		c.rec.sends = append(c.rec.sends, max(called.Sub(*c.due), 0))
		late = max(lim.Now.Sub(*c.ask), 0)
		*c.due, *c.ask = time.Time{}, time.Time{}
	}
	for _, j := range jobs {
		c.rec.late[j.StartedAt.UnixMicro()] = late
	}
	if lim.By == proto.LimitRate {
		*c.due, *c.ask = called.Add(lim.Wait), lim.Now.Add(lim.Wait)
	}
	return acked, jobs, lim, registered, err
}

// rateKept checks starts (by Redis's clock, claimed by workers timed by rec) under a rate
// of n per period, burst 1: at most n in any window of one period, exactly, and the mean
// rate from the first start to the last within 2% of n per period once the time lost to
// late claims is left out (see above), and never over n by more than 0.1%. It logs the
// figures, under name.
func (rec *claimLateness) rateKept(t *testing.T, name string, starts []time.Time, n int, period time.Duration) {
	t.Helper()
	if len(starts) < 2 {
		t.Fatalf("%d jobs started, want many", len(starts))
	}
	starts = slices.Clone(starts)
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range starts {
		j, _ := slices.BinarySearchFunc(starts, starts[i].Add(period), func(a, b time.Time) int { return a.Compare(b) })
		most = max(most, j-i)
	}
	if most > n {
		t.Errorf("%d starts in a window of %v, want at most %d", most, period, n)
	}
	tau := period / time.Duration(n)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var lost, excused time.Duration
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]) - tau; gap > 0 {
			lost += gap
			excused += min(gap, max(rec.late[starts[i].UnixMicro()]-rateAhead, 0))
		}
	}
	span := starts[len(starts)-1].Sub(starts[0])
	per := func(d time.Duration) float64 { return float64(len(starts)-1) * float64(period) / float64(d) }
	raw, mean := per(span), per(span-excused)
	if mean < 0.98*float64(n) || raw > 1.001*float64(n) {
		t.Errorf("mean rate %.3f per %v over %d starts (%.3f with the %v lost to claims sent late), want %d, within 2%% under it and never over",
			mean, period, len(starts), raw, excused.Round(time.Millisecond), n)
	}
	if excused > span/10 {
		t.Errorf("%v of %v lost to claims that came late, want under a tenth: the claims, not the machine, are late",
			excused.Round(time.Millisecond), span.Round(time.Millisecond))
	}
	sends := slices.Clone(rec.sends)
	slices.Sort(sends)
	var median, worst time.Duration
	if len(sends) > 0 {
		median, worst = sends[len(sends)/2], sends[len(sends)-1]
	}
	// The time lost is left out only when the claims came late, not when the worker chose
	// to send them late: a worker that waited longer than Redis said would make every
	// claim late, and its losses look like the machine's. Its own timer, as the design
	// budgets it (rate_ahead), is late by less than 20ms: 1-2.6ms in the median at load 12
	// on 2 cores, 7.5ms with two valgrind runs beside; 2 x Wait would be about 30ms.
	if median > rateAhead {
		t.Errorf("the workers sent their claims %v late in the median after a rate reply, want under %v", median, rateAhead)
	}
	t.Logf("FIGURES %s: %d starts, most in any %v window %d, mean %.3f per %v (%.3f with the %v lost to claims sent late; "+
		"%v lost in all), claims after a rate reply sent late by %v median, %v at most",
		name, len(starts), period, most, mean, period, raw, excused.Round(time.Millisecond), lost.Round(time.Millisecond),
		median.Round(time.Microsecond), worst.Round(time.Millisecond))
}
