package scripts

import (
	"context"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// The now of claim.lua's and ackclaim.lua's replies is Redis TIME in microseconds, and
// two claims never share one: a worker orders the replies of claims in flight by it.
func TestClaimNowOrdersClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	p := redistest.Prefix(t) + ":{q}:"
	claimKeys := []string{p + "ready", p + "active", p + "paused", p + "events", p + "limit"}
	ackClaimKeys := []string{p + "active", p + "done", p + "ready", p + "paused", p + "dead", p + "events", p + "limit", p + "wake"}
	// Run each once by EVALSHA/EVAL, so the node of this slot has them for the pipeline.
	if err := Claim.Run(ctx, rdb, claimKeys, p+"job:", 1, 1000, "w", "t", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := AckClaim.Run(ctx, rdb, ackClaimKeys, p+"job:", p+"stats:", 1000, 10, 1, 1000, "w", "t", 1000, 10, 0, "", 0, "").Err(); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	pipe := rdb.Pipeline()
	nows := make([]func() (int64, error), n)
	for i := range n {
		if i%2 == 0 {
			cmd := Claim.EvalSha(ctx, pipe, claimKeys, p+"job:", 1, 1000, "w", "t", 0)
			nows[i] = func() (int64, error) {
				v, err := cmd.Slice()
				if err != nil {
					return 0, err
				}
				now, _ := v[0].(int64)
				return now, nil
			}
		} else {
			cmd := AckClaim.EvalSha(ctx, pipe, ackClaimKeys, p+"job:", p+"stats:", 1000, 10, 1, 1000, "w", "t", 1000, 10, 0, "", 0, "")
			nows[i] = func() (int64, error) {
				v, err := cmd.Slice()
				if err != nil {
					return 0, err
				}
				now, _ := v[1].(int64)
				return now, nil
			}
		}
	}
	sent := time.Now()
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var prev int64
	for i, now := range nows {
		us, err := now()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if i == 0 {
			if d := time.UnixMicro(us).Sub(sent); d < -5*time.Second || d > 5*time.Second {
				t.Fatalf("now = %d reads as %s, %s from the test's clock; want microseconds since the epoch",
					us, time.UnixMicro(us), d)
			}
		}
		if us <= prev {
			t.Fatalf("call %d: now = %d, want after the previous call's %d", i, us, prev)
		}
		prev = us
	}
}
