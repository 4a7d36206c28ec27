package queue

import (
	"errors"
	"testing"
	"time"
)

// The ack of a plain job (a claim's copy whose hash had none of unique_key, batch and
// limit_key: Job.hint '1') reads fewer fields (the hints of ack_jobs in scripts/lib). What
// can change while a job runs must still count: an operator's cancel, a dependent linked
// to it meanwhile, the lease.
func TestAckPlainJobStillSeesCancelDependentsAndLease(t *testing.T) {
	for _, combined := range []bool{false, true} {
		name := "Ack"
		if combined {
			name = "AckClaim"
		}
		t.Run(name, func(t *testing.T) {
			c := setup(t, Config{DoneRetention: time.Hour})
			cancelled, waitedOn, plain := mustEnqueue(t, c, "a"), mustEnqueue(t, c, "a"), mustEnqueue(t, c, "a")
			held, err := c.broker().Claim(ctx, "default", 3, time.Minute, "w")
			if err != nil || len(held) != 3 {
				t.Fatalf("Claim(3) = %d jobs, %v; want 3", len(held), err)
			}
			for _, j := range held {
				if j.hint != '1' {
					t.Fatalf("claimed job %s without unique key, batch or limit key: hint %q, want '1'", j.ID, j.hint)
				}
			}
			if _, err := c.Cancel(ctx, "default", cancelled); err != nil {
				t.Fatalf("Cancel(active job) err = %v", err)
			}
			dependent := mustEnqueue(t, c, "b", After(waitedOn))
			mustState(t, c, "default", dependent, StateWaiting)
			stale := *held[2]
			stale.Lease += "x"
			finished := []*Job{held[0], held[1], &stale, held[2]}
			var acked []error
			if combined {
				fin := make([]Finished, len(finished))
				for i, j := range finished {
					fin[i] = Finished{Job: j}
				}
				acked, _, err = c.broker().ackFinished(ctx, "default", fin, 0, time.Minute, "w")
				if err != nil {
					t.Fatalf("AckClaim() err = %v", err)
				}
			} else {
				for _, j := range finished {
					acked = append(acked, c.broker().Ack(ctx, j, nil))
				}
			}
			if !errors.Is(acked[0], ErrCancelled) || acked[1] != nil || !errors.Is(acked[2], ErrLeaseLost) || acked[3] != nil {
				t.Fatalf("acks = %v; want [ErrCancelled, nil, ErrLeaseLost, nil]", acked)
			}
			if j := mustState(t, c, "default", cancelled, StateDead); j.LastError != "cancelled by operator" {
				t.Errorf("cancelled job's last error = %q, want cancelled by operator", j.LastError)
			}
			mustState(t, c, "default", waitedOn, StateDone)
			mustState(t, c, "default", plain, StateDone)
			deliverAll(t, c, "default")
			mustState(t, c, "default", dependent, StateReady)
		})
	}
}

// A job with a unique key or a batch is not plain: its ack reads those fields, and so does
// the ack of a Job built by hand, whatever it holds. A keyed job's ack reads its key
// (hint '2').
func TestAckOfJobNotPlainReadsEveryField(t *testing.T) {
	c := setup(t, Config{DoneRetention: time.Hour})
	unique := mustEnqueue(t, c, "u", Unique(time.Hour))
	keyed := mustEnqueue(t, c, "k", LimitKey("customer:1"))
	batch, _, err := c.NewBatch(ctx, BatchOptions{}, []BatchJob{{Type: "b", Payload: []byte(`{"n":1}`)}})
	if err != nil {
		t.Fatalf("NewBatch() err = %v", err)
	}
	held, err := c.broker().Claim(ctx, "default", 3, time.Minute, "w")
	if err != nil || len(held) != 3 {
		t.Fatalf("Claim(3) = %d jobs, %v; want 3", len(held), err)
	}
	for _, j := range held {
		if want := map[bool]byte{true: '2', false: 0}[j.ID == keyed]; j.hint != want {
			t.Errorf("claimed job %s of type %s: hint %q, want %q", j.ID, j.Type, j.hint, want)
		}
		if j.ID == unique {
			// As a caller that kept only the ID, queue and lease would.
			j = &Job{ID: j.ID, Queue: j.Queue, Lease: j.Lease}
		}
		if err := c.broker().Ack(ctx, j, nil); err != nil {
			t.Fatalf("Ack(%s) err = %v", j.ID, err)
		}
	}
	mustState(t, c, "default", keyed, StateDone)
	deliverAll(t, c, "default")
	if st, err := c.BatchStatus(ctx, batch); err != nil || st.State != BatchSucceeded {
		t.Errorf("BatchStatus(batch of the acked child) = %+v, %v; want %s", st, err, BatchSucceeded)
	}
	if id, err := c.Enqueue(ctx, "u", []byte(`{"n":1}`), Unique(time.Hour)); err != nil || id == unique {
		t.Errorf("Enqueue(same unique job after the first was acked) = %s, %v; want a new job (key released)", id, err)
	}
}

// A keyed job's ack (hint '2', reading only its limit key of the fields a plain job
// lacks) frees its key's slot: with key concurrency 1, the key's next job is claimed
// right after the ack, by Ack and by AckClaim.
func TestAckOfKeyedJobFreesItsKey(t *testing.T) {
	for _, combined := range []bool{false, true} {
		t.Run(map[bool]string{false: "Ack", true: "AckClaim"}[combined], func(t *testing.T) {
			c := setup(t, Config{DoneRetention: time.Hour})
			if err := c.SetLimit(ctx, "default", Limit{KeyConcurrency: 1}); err != nil {
				t.Fatal(err)
			}
			first, second := mustEnqueue(t, c, "k", LimitKey("customer:1")), mustEnqueue(t, c, "k", LimitKey("customer:1"))
			held, err := c.broker().Claim(ctx, "default", 2, time.Minute, "w")
			if err != nil || len(held) != 1 || held[0].ID != first || held[0].hint != '2' {
				t.Fatalf("Claim(2) under key concurrency 1 = %v, %v; want %s alone, hint '2'", held, err, first)
			}
			var next []*Job
			if combined {
				_, next, err = c.broker().ackFinished(ctx, "default", []Finished{{Job: held[0]}}, 2, time.Minute, "w")
			} else {
				if err = c.broker().Ack(ctx, held[0], nil); err == nil {
					next, err = c.broker().Claim(ctx, "default", 2, time.Minute, "w")
				}
			}
			if err != nil || len(next) != 1 || next[0].ID != second {
				t.Fatalf("claim after the keyed ack = %v, %v; want %s (the key's slot freed)", next, err, second)
			}
		})
	}
}
