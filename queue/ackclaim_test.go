package queue

import (
	"errors"
	"testing"
	"time"
)

func TestAckClaimAcksThenClaims(t *testing.T) {
	c := setup(t, Config{})
	first := mustEnqueue(t, c, "a")
	second := mustEnqueue(t, c, "a")
	third := mustEnqueue(t, c, "a")
	held, err := c.broker().Claim(ctx, "default", 2, 10*time.Second, "w1")
	if err != nil || len(held) != 2 || held[0].ID != first || held[1].ID != second {
		t.Fatalf("Claim(2) = %v, %v; want %s, %s", held, err, first, second)
	}
	stale := *held[1]
	stale.Lease += "x" // a token that is not the job's: must change nothing
	acked, jobs, err := c.broker().ackFinished(ctx, "default",
		[]Finished{{Job: held[0], Result: []byte("ok")}, {Job: &stale, Result: []byte("stale")}},
		5, 10*time.Second, "w2")
	if err != nil {
		t.Fatalf("AckClaim() err = %v", err)
	}
	if len(acked) != 2 || acked[0] != nil || !errors.Is(acked[1], ErrLeaseLost) {
		t.Errorf("AckClaim() acked = %v, want [nil, ErrLeaseLost]", acked)
	}
	if len(jobs) != 1 || jobs[0].ID != third {
		t.Fatalf("AckClaim() claimed %v, want only %s", jobs, third)
	}
	j := jobs[0]
	if j.State != StateActive || j.Attempt != 1 || j.Worker != "w2" || j.Lease == "" ||
		j.StartedAt.IsZero() || string(j.Payload) != `{"n":1}` || j.Type != "a" || j.Queue != "default" {
		t.Errorf("claimed job = %+v", j)
	}
	if got, err := c.Get(ctx, "default", third); err != nil || got.State != StateActive ||
		got.Worker != "w2" || !got.StartedAt.Equal(j.StartedAt.Truncate(time.Millisecond)) || got.Attempt != 1 {
		t.Errorf("claimed job in Redis = %+v, %v; want it as AckClaim returned it", got, err)
	}
	if got, err := c.Get(ctx, "default", first); err != nil || got.State != StateDone || string(got.Result) != "ok" {
		t.Errorf("acked job = %+v, %v; want done with result ok", got, err)
	}
	if got, err := c.Get(ctx, "default", second); err != nil || got.State != StateActive || len(got.Result) != 0 {
		t.Errorf("job acked with a wrong token = %+v, %v; want still active, no result", got, err)
	}
	// The claimed job's lease is fenced like any other: Ack with it works once.
	if err := c.broker().Ack(ctx, j, nil); err != nil {
		t.Errorf("Ack(claimed by AckClaim) err = %v", err)
	}
	if err := c.broker().HandBack(ctx, held[1], 0); err != nil {
		t.Errorf("HandBack(the job whose stale ack was refused) err = %v", err)
	}
}

func TestAckClaimOnlyAcksOrOnlyClaims(t *testing.T) {
	c := setup(t, Config{DoneRetention: -1})
	id := mustEnqueue(t, c, "a")
	acked, jobs, err := c.broker().ackFinished(ctx, "default", nil, 1, time.Minute, "w")
	if err != nil || len(acked) != 0 || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("AckClaim(no acks, 1) = %v, %v, %v; want job %s", acked, jobs, err, id)
	}
	acked, more, err := c.broker().ackFinished(ctx, "default", []Finished{{Job: jobs[0]}}, 0, time.Minute, "w")
	if err != nil || len(acked) != 1 || acked[0] != nil || len(more) != 0 {
		t.Fatalf("AckClaim(1 ack, 0) = %v, %v, %v; want the ack only", acked, more, err)
	}
	if _, err := c.Get(ctx, "default", id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(acked with DoneRetention < 0) err = %v, want ErrNotFound", err)
	}
	if acked, jobs, err := c.broker().ackFinished(ctx, "default", nil, 0, time.Minute, "w"); err != nil || acked != nil || jobs != nil {
		t.Errorf("AckClaim(nothing) = %v, %v, %v; want nothing", acked, jobs, err)
	}
}

func TestAckClaimPausedQueueStillAcks(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a")
	mustEnqueue(t, c, "a")
	j := claimOne(t, c, "default", time.Minute, "w")
	if err := c.Pause(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	acked, jobs, err := c.broker().ackFinished(ctx, "default", []Finished{{Job: j}}, 5, time.Minute, "w")
	if err != nil || len(acked) != 1 || acked[0] != nil || len(jobs) != 0 {
		t.Fatalf("AckClaim(paused) = %v, %v, %v; want the ack and no claim", acked, jobs, err)
	}
}

func TestAckClaimRefusesAnotherQueuesJob(t *testing.T) {
	c := setup(t, Config{})
	mustEnqueue(t, c, "a", On("other"))
	j := claimOne(t, c, "other", time.Minute, "w")
	if _, _, err := c.broker().ackFinished(ctx, "default", []Finished{{Job: j}}, 1, time.Minute, "w"); !errors.Is(err, ErrInvalid) {
		t.Errorf("AckClaim(job of another queue) err = %v, want ErrInvalid", err)
	}
	if got, _ := c.Get(ctx, "other", j.ID); got == nil || got.State != StateActive {
		t.Errorf("job after the refused AckClaim = %+v, want still active", got)
	}
}
