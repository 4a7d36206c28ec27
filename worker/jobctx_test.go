package worker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Contexts derived from a handler's context (WithTimeout, WithCancel, as errgroup and HTTP
// clients make) end with it and report what it reports: DeadlineExceeded at the job's
// deadline, Canceled with the cause otherwise, whether made before or after it ended.
func TestDerivedContextsSeeWhyTheJobEnded(t *testing.T) {
	t.Parallel()
	for _, cause := range []error{context.DeadlineExceeded, errLeaseLost, errCancelled} {
		wantErr := context.Canceled
		if cause == context.DeadlineExceeded {
			wantErr = context.DeadlineExceeded
		}
		c := newJobCtx(context.WithoutCancel(context.Background()), time.Now().Add(time.Hour), new([]byte))
		early, stop := context.WithTimeout(c, 2*time.Hour)
		defer stop()
		cancelled, stop2 := context.WithCancel(c)
		defer stop2()
		ran := make(chan struct{})
		context.AfterFunc(c, func() { close(ran) })
		done := c.Done()
		if c.Err() != nil || context.Cause(c) != nil {
			t.Fatalf("before cancel: Err %v, Cause %v", c.Err(), context.Cause(c))
		}

		c.cancel(cause)
		c.cancel(errors.New("a later cause")) // the first one wins
		late, stop3 := context.WithCancel(c)
		defer stop3()
		for name, ctx := range map[string]context.Context{"job": c, "WithTimeout before": early,
			"WithCancel before": cancelled, "WithCancel after": late} {
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
				t.Fatalf("%s (cause %v): Done not closed", name, cause)
			}
			if err, got := ctx.Err(), context.Cause(ctx); err != wantErr || got != cause {
				t.Errorf("%s (cause %v): Err %v, Cause %v; want %v, %v", name, cause, err, got, wantErr, cause)
			}
		}
		select {
		case <-done:
		default:
			t.Errorf("cause %v: the Done channel taken before cancel is still open", cause)
		}
		select {
		case <-ran:
		case <-time.After(2 * time.Second):
			t.Errorf("cause %v: context.AfterFunc did not run", cause)
		}
	}
}
