package queue

import (
	"errors"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

func TestListByState(t *testing.T) {
	c := setup(t, Config{})
	var ready []string
	for range 5 {
		ready = append(ready, mustEnqueue(t, c, "a"))
	}
	sched := mustEnqueue(t, c, "a", Delay(time.Hour))
	got, err := c.List(ctx, "default", StateReady, 1, 2)
	if err != nil || len(got) != 2 || got[0].ID != ready[1] || got[1].ID != ready[2] {
		t.Fatalf("List(ready, 1, 2) = %v, %v; want jobs 1 and 2 in claim order", jobIDs(got), err)
	}
	got, _ = c.List(ctx, "default", StateScheduled, 0, 10)
	if len(got) != 1 || got[0].ID != sched || got[0].State != StateScheduled {
		t.Errorf("List(scheduled) = %v", jobIDs(got))
	}
	j := claimOne(t, c, "default", time.Minute, "w")
	if got, _ := c.List(ctx, "default", StateActive, 0, 10); len(got) != 1 || got[0].ID != j.ID || got[0].Lease != "" {
		t.Errorf("List(active) = %v", jobIDs(got))
	}
	c.broker().Ack(ctx, j, nil)
	j = claimOne(t, c, "default", time.Minute, "w")
	c.broker().Fail(ctx, j, "x", proto.NoRetry)
	if got, _ := c.List(ctx, "default", StateDone, 0, 10); len(got) != 1 || got[0].ID != ready[0] {
		t.Errorf("List(done) = %v, want [%s]", jobIDs(got), ready[0])
	}
	if got, _ := c.List(ctx, "default", StateDead, 0, 10); len(got) != 1 || got[0].ID != ready[1] {
		t.Errorf("List(dead) = %v, want [%s]", jobIDs(got), ready[1])
	}
	if _, err := c.List(ctx, "nope", StateReady, 0, 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("List(unknown queue) err = %v, want ErrNotFound", err)
	}
	if _, err := c.List(ctx, "default", "finished", 0, 10); !errors.Is(err, ErrInvalid) {
		t.Errorf("List(bad state) err = %v, want ErrInvalid", err)
	}
	if _, err := c.List(ctx, "default", StateReady, -1, 10); !errors.Is(err, ErrInvalid) {
		t.Errorf("List(offset -1) err = %v, want ErrInvalid", err)
	}
}

func jobIDs(jobs []*Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}
