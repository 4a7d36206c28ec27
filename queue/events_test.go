package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// readEvents reads n events of queues from from, failing the test on an error or when
// they do not come within 5s.
func readEvents(t *testing.T, c *Client, queues []string, from string, n int) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var got []Event
	for e, err := range c.Events(ctx, queues, from) {
		if err != nil {
			t.Fatalf("Events(%v, %q) after %d events: err = %v", queues, from, len(got), err)
		}
		got = append(got, e)
		if len(got) == n {
			break
		}
	}
	return got
}

// summary is an event as "name id attempt worker".
func summary(e Event) string {
	return fmt.Sprintf("%s %s %d %s", e.Name, e.ID, e.Attempt, e.Worker)
}

// Every transition of a job's life, each through its own script, leaves exactly one event
// in the queue's stream, in commit order, with the job's type, attempt and worker; a
// repeated pause writes none.
func TestEventsFollowAJobsWholeLife(t *testing.T) {
	c := setup(t, Config{})
	b := c.broker()
	a, err := c.Enqueue(ctx, "mail", nil)
	if err != nil {
		t.Fatal(err)
	}
	later, err := c.Enqueue(ctx, "mail", nil, Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := b.Claim(ctx, "default", 1, time.Minute, "w1")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim() = %v, %v", jobs, err)
	}
	if _, err := b.Fail(ctx, jobs[0], "panic: boom\n\ngoroutine 1 [running]:\nmain.main()", 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Promote(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	_, jobs, err = b.ackFinished(ctx, "default", nil, 1, time.Minute, "w2")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("AckClaim(claim 1) = %v, %v", jobs, err)
	}
	if err := b.HandBack(ctx, jobs[0], 0); err != nil {
		t.Fatal(err)
	}
	_, jobs, err = b.ackFinished(ctx, "default", nil, 1, time.Minute, "w2")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("AckClaim(claim 1) = %v, %v", jobs, err)
	}
	if acked, _, err := b.ackFinished(ctx, "default", []Finished{{Job: jobs[0]}}, 0, time.Minute, "w2"); err != nil || acked[0] != nil {
		t.Fatalf("AckClaim(ack) = %v, %v", acked, err)
	}
	if _, err := c.Cancel(ctx, "default", later); err != nil {
		t.Fatal(err)
	}
	if err := c.Retry(ctx, "default", later); err != nil {
		t.Fatal(err)
	}
	for _, step := range []func(context.Context, string) error{c.Pause, c.Pause, c.Resume, c.Resume} {
		if err := step(ctx, "default"); err != nil {
			t.Fatal(err)
		}
	}

	want := []string{
		"enqueued " + a + " 0 ", "scheduled " + later + " 0 ",
		"started " + a + " 1 w1", "retry " + a + " 1 w1",
		"started " + a + " 2 w2", "handed_back " + a + " 2 w2",
		"started " + a + " 2 w2", "done " + a + " 2 w2",
		"cancelled " + later + " 0 ", "requeued " + later + " 0 ",
		"paused  0 ", "resumed  0 ",
	}
	got := readEvents(t, c, []string{"default"}, "0", len(want))
	var sums []string
	for i, e := range got {
		sums = append(sums, summary(e))
		if e.Queue != "default" || (e.ID != "" && e.Type != "mail") {
			t.Errorf("event %d = %+v, want queue default and type mail", i, e)
		}
		if i > 0 && e.sid.compare(got[i-1].sid) <= 0 {
			t.Errorf("event %d's ID %s is not after %s", i, e.sid, got[i-1].sid)
		}
		if e.Cursor != e.sid.String() {
			t.Errorf("event %d cursor %q, want its entry ID %s (one queue)", i, e.Cursor, e.sid)
		}
	}
	if !slices.Equal(sums, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(sums, "\n"), strings.Join(want, "\n"))
	}
	if got[3].Error != "panic: boom" {
		t.Errorf("retry event error = %q, want the panic's first line", got[3].Error)
	}
	if n := c.rdb.XLen(ctx, c.keys.queue("default").events).Val(); n != int64(len(want)) {
		t.Errorf("stream holds %d entries, want %d (one per change, none for promote or a repeated pause)", n, len(want))
	}
}

// With events off a Client writes no stream at all, whatever it does.
func TestEventsOffWritesNoStream(t *testing.T) {
	c := setup(t, Config{Events: -1})
	b := c.broker()
	id, err := c.Enqueue(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, "t", nil, Delay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	jobs, _ := b.Claim(ctx, "default", 1, time.Minute, "w")
	if _, err := b.Fail(ctx, jobs[0], "x", 0); err != nil {
		t.Fatal(err)
	}
	b.Promote(ctx, "default")
	_, jobs, _ = b.ackFinished(ctx, "default", nil, 1, time.Minute, "w")
	if err := b.Ack(ctx, jobs[0], nil); err != nil {
		t.Fatal(err)
	}
	c.Pause(ctx, "default")
	c.Resume(ctx, "default")
	if _, err := c.Cancel(ctx, "default", id); !errors.Is(err, ErrState) {
		t.Errorf("Cancel(done) = %v, want ErrState", err)
	}
	if n := c.rdb.Exists(ctx, c.keys.queue("default").events).Val(); n != 0 {
		t.Errorf("events stream exists with Config.Events < 0, want no stream written")
	}
	if j, _ := c.Get(ctx, "default", id); j.State != StateDone || len(j.Attempts) != 2 {
		t.Errorf("job = %+v, want done with 2 attempts in its history (history does not depend on events)", j)
	}
}

// A reader that stops and resumes from the cursor of the last event it took loses
// nothing while the stream still holds what follows; once Redis has trimmed that, it gets
// a GapError naming its cursor and the stream's first entry, and resuming from the gap's
// cursor goes on from exactly that entry.
func TestEventsResumeFromCursorAndGap(t *testing.T) {
	c := setup(t, Config{Events: 50})
	var ids []string
	enqueue := func(n int) {
		t.Helper()
		batch := make([]BatchJob, n)
		for i := range batch {
			batch[i] = BatchJob{Type: "t"}
		}
		res, err := c.EnqueueBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	enqueue(20)
	first := readEvents(t, c, nil, "0", 5)
	cursor := first[4].Cursor
	enqueue(20)
	rest := readEvents(t, c, nil, cursor, 35)
	for i, e := range append(first, rest...) {
		if e.ID != ids[i] || e.Name != EventEnqueued {
			t.Fatalf("event %d = %s %s, want enqueued %s: resumed reader lost or reordered events", i, e.Name, e.ID, ids[i])
		}
	}

	// 300 more entries (one job per call, one entry each): far past what the stream keeps
	// (about 50 entries, in nodes of 100).
	for range 300 {
		if _, err := c.Enqueue(ctx, "t", nil); err != nil {
			t.Fatal(err)
		}
	}
	var gap *GapError
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, err := range c.Events(ctx, nil, rest[len(rest)-1].Cursor) {
		if !errors.As(err, &gap) || !errors.Is(err, ErrEventsGap) {
			t.Fatalf("Events(behind the stream) first yield err = %v, want a *GapError", err)
		}
		break
	}
	head, err := c.rdb.XRangeN(ctx, c.keys.queue("default").events, "-", "+", 1).Result()
	if err != nil || len(head) != 1 {
		t.Fatal(head, err)
	}
	if gap.Cursor != rest[len(rest)-1].Cursor || gap.First != head[0].ID || gap.Queue != "default" {
		t.Errorf("gap = %+v, want cursor %s, first %s", gap, rest[len(rest)-1].Cursor, head[0].ID)
	}
	next := readEvents(t, c, nil, gap.Resume, 1)
	if next[0].Cursor != head[0].ID {
		t.Errorf("resumed after the gap at %s, want the stream's first entry %s", next[0].Cursor, head[0].ID)
	}
	if n := c.rdb.XLen(ctx, c.keys.queue("default").events).Val(); n > 250 {
		t.Errorf("stream holds %d entries with Config.Events 50, want it capped", n)
	}
}

// Reading several queues, every event's cursor holds each queue's position, so resuming
// from any one event loses nothing in any queue.
func TestEventsSeveralQueuesCursor(t *testing.T) {
	c := setup(t, Config{})
	a, _ := c.Enqueue(ctx, "t", nil, On("a"))
	b, _ := c.Enqueue(ctx, "t", nil, On("b"))
	got := readEvents(t, c, []string{"b", "a"}, "0", 2)
	ids := map[string]string{got[0].Queue: got[0].ID, got[1].Queue: got[1].ID}
	if ids["a"] != a || ids["b"] != b {
		t.Fatalf("events = %+v, want one enqueue in each of a and b", got)
	}
	if !strings.HasPrefix(got[1].Cursor, "a=") || !strings.Contains(got[1].Cursor, ",b=") {
		t.Errorf("cursor %q, want a=ID,b=ID", got[1].Cursor)
	}
	a2, _ := c.Enqueue(ctx, "t", nil, On("a"))
	next := readEvents(t, c, nil, got[1].Cursor, 1)
	if next[0].ID != a2 || next[0].Queue != "a" {
		t.Errorf("resumed from %q = %+v, want only the new job %s of a", got[1].Cursor, next[0], a2)
	}
	for _, bad := range []string{"x", "a=1-x", "a b=1", "1-2-3"} {
		for _, err := range c.Events(ctx, []string{"a"}, bad) {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Events(from %q) err = %v, want ErrInvalid", bad, err)
			}
			break
		}
	}
}

// Wait on a job that finished already returns it at once, without an event to wait for.
func TestWaitOnFinishedJobReturnsAtOnce(t *testing.T) {
	c := setup(t, Config{})
	id, _ := c.Enqueue(ctx, "t", nil)
	jobs, _ := c.broker().Claim(ctx, "default", 1, time.Minute, "w")
	if err := c.broker().Ack(ctx, jobs[0], []byte("ok")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	j, err := c.Wait(ctx, "default", id)
	if err != nil || j.State != StateDone || string(j.Result) != "ok" {
		t.Fatalf("Wait(done job) = %+v, %v; want it done with its result", j, err)
	}
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("Wait(done job) took %s, want at once", took)
	}
	if _, err := c.Wait(ctx, "default", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Wait(unknown) err = %v, want ErrNotFound", err)
	}
}

// Wait returns when the job finishes later, done or dead, and not before.
func TestWaitReturnsWhenJobFinishes(t *testing.T) {
	c := setup(t, Config{})
	for _, fail := range []bool{false, true} {
		id, _ := c.Enqueue(ctx, "t", nil, MaxRetry(0))
		type result struct {
			j   *Job
			err error
		}
		out := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			j, err := c.Wait(ctx, "default", id)
			out <- result{j, err}
		}()
		jobs, _ := c.broker().Claim(ctx, "default", 1, time.Minute, "w")
		// Give Wait time to note the stream and read the job (still active): it must not
		// return for the claim.
		select {
		case r := <-out:
			t.Fatalf("Wait returned before the job finished: %+v, %v", r.j, r.err)
		case <-time.After(300 * time.Millisecond):
		}
		want := StateDone
		if fail {
			want = StateDead
			if _, err := c.broker().Fail(ctx, jobs[0], "bad", 0); err != nil {
				t.Fatal(err)
			}
		} else if err := c.broker().Ack(ctx, jobs[0], nil); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-out:
			if r.err != nil || r.j.State != want || r.j.ID != id {
				t.Errorf("Wait() = %+v, %v; want job %s %s", r.j, r.err, id, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Wait did not return within 5s of the job ending %s", want)
		}
	}
}

// The history keeps every attempt that ended (failed, reaped), the last 10 of them, with
// the done attempt added from the hash; a pending job and a job done at its first attempt
// carry no history field, so their hashes do not grow (the latter stays listpack).
func TestAttemptHistory(t *testing.T) {
	c := setup(t, Config{})
	b := c.broker()
	qk := c.keys.queue("default")
	id, _ := c.Enqueue(ctx, "t", nil, MaxRetry(20))
	if ok, _ := c.rdb.HExists(ctx, qk.job(id), "attempts").Result(); ok {
		t.Errorf("pending job has an attempts field, want none")
	}
	for i := 1; i <= 12; i++ {
		jobs, err := b.Claim(ctx, "default", 1, time.Minute, fmt.Sprintf("w%d", i))
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim %d = %v, %v", i, jobs, err)
		}
		if _, err := b.Fail(ctx, jobs[0], fmt.Sprintf("error %d", i), 0); err != nil {
			t.Fatal(err)
		}
		b.Promote(ctx, "default")
	}
	if _, err := b.Claim(ctx, "default", 1, time.Millisecond, "reaped-worker"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n := 0; n == 0; n, _ = b.Reap(ctx, "default") {
		if time.Now().After(deadline) {
			t.Fatal("lease of 1ms not reaped within 5s")
		}
	}
	jobs, _ := b.Claim(ctx, "default", 1, time.Minute, "last")
	if err := b.Ack(ctx, jobs[0], nil); err != nil {
		t.Fatal(err)
	}
	j, err := c.Get(ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Attempts) != 10 {
		t.Fatalf("history has %d attempts, want the last 10: %+v", len(j.Attempts), j.Attempts)
	}
	got := j.Attempts
	if got[0].Attempt != 5 || got[0].Outcome != "retry" || got[0].Error != "error 5" || got[0].Worker != "w5" {
		t.Errorf("oldest kept attempt = %+v, want attempt 5 retry on w5 with its error's first line", got[0])
	}
	if r := got[8]; r.Attempt != 13 || r.Outcome != "reaped" || r.Worker != "reaped-worker" || !strings.Contains(r.Error, "lease expired") {
		t.Errorf("reaped attempt = %+v", r)
	}
	if d := got[9]; d.Attempt != 14 || d.Outcome != "done" || d.Worker != "last" || d.FinishedAt.Before(d.StartedAt) || d.StartedAt.IsZero() {
		t.Errorf("done attempt = %+v", d)
	}

	ok, _ := c.Enqueue(ctx, "t", nil)
	jobs, _ = b.Claim(ctx, "default", 1, time.Minute, "w")
	b.Ack(ctx, jobs[0], nil)
	if has, _ := c.rdb.HExists(ctx, qk.job(ok), "attempts").Result(); has {
		t.Errorf("job done at its first attempt has an attempts field, want none")
	}
	if enc := c.rdb.ObjectEncoding(ctx, qk.job(ok)).Val(); enc != "listpack" {
		t.Errorf("done job's hash encoding = %s, want listpack", enc)
	}
	if j, _ := c.Get(ctx, "default", ok); len(j.Attempts) != 1 || j.Attempts[0].Outcome != "done" {
		t.Errorf("done job's history = %+v, want its one done attempt", j.Attempts)
	}
}

// A purge writes one purged event per call, without job IDs: Wait reads its job again on
// it, and returns ErrNotFound for a job the purge deleted.
func TestWaitOnPurgedJob(t *testing.T) {
	c := setup(t, Config{})
	id, _ := c.Enqueue(ctx, "t", nil)
	out := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := c.Wait(ctx, "default", id)
		out <- err
	}()
	// Let Wait note the stream's position and find the job ready before the purge.
	select {
	case err := <-out:
		t.Fatalf("Wait returned before the purge: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if n, err := c.Purge(ctx, "default", StateReady); err != nil || n != 1 {
		t.Fatalf("Purge() = %d, %v", n, err)
	}
	select {
	case err := <-out:
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Wait(purged job) err = %v, want ErrNotFound", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return within 5s of the purge")
	}
	got := readEvents(t, c, nil, "0", 2)
	if got[1].Name != EventPurged || got[1].ID != "" || got[1].Error != "deleted 1 ready jobs" {
		t.Errorf("purge event = %+v, want purged, no ID, error \"deleted 1 ready jobs\"", got[1])
	}
}
