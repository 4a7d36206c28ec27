package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// Resuming every queue (none named) from a several-queue cursor reads the queues created
// after that cursor was written from their start: nothing they hold is skipped.
func TestEventsResumeReadsQueuesCreatedAfterTheCursor(t *testing.T) {
	c := setup(t, Config{})
	for _, q := range []string{"a", "b"} {
		if _, err := c.Enqueue(ctx, "t", nil, On(q)); err != nil {
			t.Fatal(err)
		}
	}
	got := readEvents(t, c, nil, "0", 2)
	cur := got[1].Cursor
	if !strings.Contains(cur, "a=") || !strings.Contains(cur, "b=") {
		t.Fatalf("cursor %q, want one naming a and b", cur)
	}
	c1, err := c.Enqueue(ctx, "t", nil, On("c")) // a queue created after the cursor
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c.Enqueue(ctx, "t", nil, On("a"))
	if err != nil {
		t.Fatal(err)
	}
	got = readEvents(t, c, nil, cur, 2)
	ids := map[string]string{}
	for _, e := range got {
		ids[e.Queue] = e.ID
	}
	if ids["c"] != c1 || ids["a"] != a2 {
		t.Fatalf("resumed from %q: got %v, want c's %s and a's %s", cur, ids, c1, a2)
	}
}

// A queue created after the cursor whose stream was trimmed since: the events lost are
// reported as a gap, not skipped in silence.
func TestEventsResumeReportsAGapInAQueueCreatedAfterTheCursor(t *testing.T) {
	c := setup(t, Config{Events: 50})
	for _, q := range []string{"a", "b"} {
		if _, err := c.Enqueue(ctx, "t", nil, On(q)); err != nil {
			t.Fatal(err)
		}
	}
	cur := readEvents(t, c, nil, "0", 2)[1].Cursor
	for range 300 { // far past what the stream keeps (about 50 entries, in nodes of 100)
		if _, err := c.Enqueue(ctx, "t", nil, On("c")); err != nil {
			t.Fatal(err)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for e, err := range c.Events(tctx, nil, cur) {
		var gap *GapError
		if !errors.As(err, &gap) || gap.Queue != "c" {
			t.Fatalf("resumed from %q: got %v %v, want a gap in queue c", cur, e, err)
		}
		break
	}
}

// A follow of every queue picks up a queue created while it runs, from its first event.
func TestEventsFollowPicksUpQueuesCreatedWhileItRuns(t *testing.T) {
	c := setup(t, Config{})
	if _, err := c.Enqueue(ctx, "t", nil, On("old")); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	started := false
	var id string
	for e, err := range c.Events(tctx, nil, "0") {
		if err != nil {
			t.Fatalf("Events: %v (a queue created while following never showed)", err)
		}
		if !started {
			started = true
			if id, err = c.Enqueue(ctx, "t", nil, On("brandnew")); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if e.Queue == "brandnew" && e.ID == id && e.Name == EventEnqueued {
			if !strings.Contains(e.Cursor, "brandnew=") || !strings.Contains(e.Cursor, "old=") {
				t.Errorf("cursor %q, want both queues' positions", e.Cursor)
			}
			return
		}
		t.Fatalf("got %v, want brandnew's enqueued %s", e, id)
	}
}

// Wait and Events end with ctx's error when ctx's deadline passes, also with a client
// whose read deadline follows ctx's (ContextTimeoutEnabled), whose i/o timeout can come a
// moment before ctx's timer marks ctx done.
func TestWaitAndEventsEndWithCtxsDeadline(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("builds its own single-node client")
	}
	t.Parallel()
	for _, cte := range []bool{true, false} {
		rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: cte})
		defer rdb.Close()
		c, err := NewClient(rdb, Config{Prefix: redistest.Prefix(t)})
		if err != nil {
			t.Fatal(err)
		}
		id, err := c.Enqueue(ctx, "t", nil, Delay(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			wctx, cancel := context.WithTimeout(ctx, time.Duration(50+i*7)*time.Millisecond)
			_, err := c.Wait(wctx, "default", id)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ContextTimeoutEnabled=%v: Wait #%d err = %v, want context.DeadlineExceeded", cte, i, err)
			}
		}
		for i := range 30 {
			wctx, cancel := context.WithTimeout(ctx, time.Duration(50+i*7)*time.Millisecond)
			for _, err := range c.Events(wctx, []string{"default"}, "") {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("ContextTimeoutEnabled=%v: Events #%d err = %v, want context.DeadlineExceeded", cte, i, err)
				}
				break
			}
			cancel()
		}
	}
}

// Reads keep working on a Redis at maxmemory (noeviction), which refuses every command
// queued in a MULTI: Depths, Events and Wait read, they do not write.
func TestReadsWorkOnAFullRedis(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("starts its own single redis-server")
	}
	t.Parallel()
	c := fullRedisClient(t, "3mb", "full")
	first, err := c.Enqueue(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 1 + fill(t, c, "a")
	d, err := c.Depths(ctx, nil)
	if err != nil || d["default"][StateReady] != int64(n) {
		t.Fatalf("Depths on a full Redis = %v, %v; want %d ready", d, err, n)
	}
	got := readEvents(t, c, []string{"default"}, "0", 1)
	if got[0].ID != first {
		t.Fatalf("Events on a full Redis: first event %v, want %s's", got[0], first)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(wctx, "default", first); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a full Redis err = %v, want ctx's deadline (the job is still ready)", err)
	}
}
