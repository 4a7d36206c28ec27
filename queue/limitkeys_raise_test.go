package queue

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/proto"
)

// A key limit raised live applies at the next claim (issue 16: "limits changed live apply
// on the next claim"), as a queue's does. Before, the ring kept a key held back until
// its old lease deadline or token, and a key's tat spent under a slow rate held its
// next job back under the fast one: up to a whole old period.
func TestRaisedKeyLimitAppliesAtTheNextClaim(t *testing.T) {
	for _, tc := range []struct {
		name         string
		before       Limit // of every key
		after        Limit
		own          bool // after is key a's own limit, not the default
		held         time.Duration
		wantHeldBack string
	}{
		{"concurrency", Limit{KeyConcurrency: 1}, Limit{KeyConcurrency: 3}, false, 29 * time.Second, proto.LimitKeys},
		{"own concurrency", Limit{KeyConcurrency: 1}, Limit{KeyConcurrency: 3}, true, 29 * time.Second, proto.LimitKeys},
		{"rate", Limit{KeyRate: 1, KeyPeriod: time.Hour}, Limit{KeyRate: 100, KeyPeriod: time.Second, KeyBurst: 10}, false, 59 * time.Minute, proto.LimitKeys},
		{"own rate", Limit{KeyRate: 1, KeyPeriod: time.Hour}, Limit{KeyRate: 100, KeyPeriod: time.Second, KeyBurst: 10}, true, 59 * time.Minute, proto.LimitKeys},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := setup(t, Config{})
			if err := c.SetLimit(ctx, "default", tc.before); err != nil {
				t.Fatal(err)
			}
			enqueueN(t, c, 3, LimitKey("a"))
			if jobs, _ := claimLimited(t, c, "default", 10); len(jobs) != 1 {
				t.Fatalf("first claim = %d jobs, want 1", len(jobs))
			}
			if more, lim := claimLimited(t, c, "default", 10); len(more) != 0 || lim.By != tc.wantHeldBack || lim.Wait < tc.held {
				t.Fatalf("claim under the old limit = %d jobs, %+v; want none, held back %v at least", len(more), lim, tc.held)
			}
			var err error
			if tc.own {
				err = c.SetKeyLimit(ctx, "default", tc.after, "a")
			} else {
				err = c.SetLimit(ctx, "default", tc.after)
			}
			if err != nil {
				t.Fatal(err)
			}
			if more, lim := claimLimited(t, c, "default", 10); len(more) != 2 {
				t.Errorf("claim after the limit was raised = %d jobs, %+v; want the other 2", len(more), lim)
			}
		})
	}
	// A key with no job ready when its rate was raised: its next job is not held back by
	// the tat the old rate left.
	c := setup(t, Config{})
	if err := c.SetLimit(ctx, "default", Limit{KeyRate: 1, KeyPeriod: time.Hour}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 1, LimitKey("b"))
	if jobs, _ := claimLimited(t, c, "default", 10); len(jobs) != 1 {
		t.Fatalf("first claim = %d jobs, want 1", len(jobs))
	}
	if err := c.SetLimit(ctx, "default", Limit{KeyRate: 100, KeyPeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 1, LimitKey("b"))
	if jobs, lim := claimLimited(t, c, "default", 10); len(jobs) != 1 {
		t.Errorf("claim of b's next job after its rate went from 1/h to 100/s = %d jobs, %+v; want it", len(jobs), lim)
	}
	// The same limits set again keep the tat: no second burst.
	if err := c.SetLimit(ctx, "default", Limit{KeyRate: 1, KeyPeriod: time.Hour}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, 2, LimitKey("b"))
	if jobs, _ := claimLimited(t, c, "default", 10); len(jobs) != 1 {
		t.Fatalf("claim under 1/h = %d jobs, want 1", len(jobs))
	}
	if err := c.SetLimit(ctx, "default", Limit{KeyRate: 1, KeyPeriod: time.Hour, KeyConcurrency: 5}); err != nil {
		t.Fatal(err)
	}
	if jobs, lim := claimLimited(t, c, "default", 10); len(jobs) != 0 {
		t.Errorf("claim after a change that left the rate as it was = %d jobs, %+v; want none (the tat stands)", len(jobs), lim)
	}
}

// ResumeKey ends a handler's pause of a key before its time: the key's jobs are claimed at
// once, the paused one first. A key paused for 1000h could not be lifted before.
func TestResumeKeyEndsAHandlersPause(t *testing.T) {
	c := setup(t, Config{})
	ids := enqueueN(t, c, 2, LimitKey("a"))
	jobs, _ := claimLimited(t, c, "default", 1)
	if len(jobs) != 1 || jobs[0].ID != ids[0] {
		t.Fatalf("claim = %+v, want the key's first job", jobs)
	}
	if err := c.broker().PauseKey(ctx, jobs[0], 1000*time.Hour, "upstream said 429"); err != nil {
		t.Fatal(err)
	}
	if more, _ := claimLimited(t, c, "default", 10); len(more) != 0 {
		t.Fatalf("claim during the key's pause = %d jobs, want none", len(more))
	}
	if was, err := c.ResumeKey(ctx, "default", "a"); err != nil || !was {
		t.Fatalf("ResumeKey() = %v, %v; want true", was, err)
	}
	evs, err := c.RecentEvents(ctx, []string{"default"}, 1)
	if err != nil || len(evs) != 1 || evs[0].Name != EventResumed || evs[0].Error != "limit key a" {
		t.Errorf("last event = %+v, %v; want resumed, limit key a", evs, err)
	}
	more, _ := claimLimited(t, c, "default", 10)
	if len(more) != 2 || more[0].ID != ids[0] {
		t.Errorf("claim after ResumeKey = %d jobs; want both, the paused one first", len(more))
	}
	if was, err := c.ResumeKey(ctx, "default", "a"); err != nil || was {
		t.Errorf("ResumeKey() of a key not paused = %v, %v; want false, nil", was, err)
	}
	for _, k := range []string{"", "a\nb", strings.Repeat("k", 201)} {
		if _, err := c.ResumeKey(ctx, "default", k); !errors.Is(err, ErrInvalid) {
			t.Errorf("ResumeKey(%q) = %v, want ErrInvalid", k, err)
		}
	}
}

// The jobs of a paused key put back during the pause (a worker's claims ahead that
// replied after the pause began come back one call each, in any order) run behind the
// paused job in their own order, not in the order they came back: with one job back
// already, a second went before it.
func TestKeyJobsPutBackDuringAPauseKeepTheirOrder(t *testing.T) {
	for _, back := range [][]int{{1, 2, 3}, {3, 2, 1}, {2, 3, 1}, {3, 1, 2}} {
		t.Run(fmt.Sprint(back), func(t *testing.T) {
			c := setup(t, Config{})
			ids := enqueueN(t, c, 5, LimitKey("a"))
			jobs, _ := claimLimited(t, c, "default", 4)
			if len(jobs) != 4 {
				t.Fatalf("claim of 4 = %d jobs", len(jobs))
			}
			if err := c.broker().PauseKey(ctx, jobs[0], 1000*time.Hour, "upstream said 429"); err != nil {
				t.Fatal(err)
			}
			for _, i := range back {
				if err := c.broker().HandBack(ctx, jobs[i], 0); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.ResumeKey(ctx, "default", "a"); err != nil {
				t.Fatal(err)
			}
			got, _ := claimLimited(t, c, "default", 10)
			var order []string
			for _, j := range got {
				order = append(order, j.ID)
			}
			if !slices.Equal(order, ids) {
				t.Errorf("claim after the pause = %v, want %v (the paused job, then the others in their order)", order, ids)
			}
		})
	}
}
