package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/scripts"
)

// An operator's call that was sent and got no reply (here the connection is cut right
// after the request went out: the script ran) may or may not have changed the queue:
// its error wraps ErrUncertain, as Enqueue's does. A ctx ended before the call gives
// ctx's plain error, and nothing changes.
func TestAdminCallsSentWithoutReplyAreUncertain(t *testing.T) {
	c, p := proxied(t)
	dead := func(q string) string {
		id := mustEnqueue(t, c, "d", On(q))
		if _, err := c.Cancel(ctx, q, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	calls := []struct {
		name   string
		script *redis.Script
		call   func(ctx context.Context) error
	}{
		{"Cancel", scripts.Cancel, func(ctx context.Context) error {
			_, err := c.Cancel(ctx, "default", mustEnqueue(t, c, "c"))
			return err
		}},
		{"Retry", scripts.Retry, func(ctx context.Context) error { return c.Retry(ctx, "r1", dead("r1")) }},
		{"RetryAllDead", scripts.Retry, func(ctx context.Context) error {
			dead("r2")
			_, err := c.RetryAllDead(ctx, "r2")
			return err
		}},
		{"Delete", scripts.Delete, func(ctx context.Context) error { return c.Delete(ctx, "default", mustEnqueue(t, c, "x")) }},
		{"Purge", scripts.Purge, func(ctx context.Context) error {
			dead("p1")
			_, err := c.Purge(ctx, "p1", StateDead)
			return err
		}},
		{"Pause", scripts.Pause, func(ctx context.Context) error { return c.Pause(ctx, "default") }},
		{"Resume", scripts.Pause, func(ctx context.Context) error { return c.Resume(ctx, "default") }},
		{"SetLimit", scripts.Limit, func(ctx context.Context) error { return c.SetLimit(ctx, "default", Limit{Concurrency: 3}) }},
		{"RemoveLimit", scripts.Limit, func(ctx context.Context) error { return c.RemoveLimit(ctx, "default") }},
		{"Quiet", scripts.Order, func(ctx context.Context) error {
			if _, _, err := c.broker().Register(context.Background(), &Process{ID: "proc-u", Kind: "worker"}, time.Minute); err != nil {
				t.Fatal(err)
			}
			return c.Quiet(ctx, "proc-u")
		}},
		{"Audit", scripts.Audit, func(ctx context.Context) error { return c.Audit(ctx, AuditEntry{Who: "t", Action: "a"}) }},
	}
	for _, tc := range calls {
		p.CutAfterRequest([]byte(tc.script.Hash()))
		if err := tc.call(ctx); !errors.Is(err, ErrUncertain) {
			t.Errorf("%s with its reply lost: err = %v, want ErrUncertain", tc.name, err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := tc.call(done); !errors.Is(err, context.Canceled) || errors.Is(err, ErrUncertain) {
			t.Errorf("%s with ctx ended before: err = %v, want context.Canceled, not ErrUncertain", tc.name, err)
		}
	}
}
