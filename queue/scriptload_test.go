package queue

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/scripts"
)

// After Redis lost its scripts (a restart or a failover without them; SCRIPT FLUSH
// here), concurrent enqueues that all meet NOSCRIPT share one load of the scripts rather
// than each sending every script's text, and every job is still written once.
func TestScriptsReloadedOnceForConcurrentCallers(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start() // its own Redis: a flush would disturb the other tests
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	rdb := srv.Client(t)
	var loads atomic.Int64
	rdb.AddHook(loadCounter{&loads})
	c, err := NewClient(rdb, Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Jobs on two queues: one pipeline of two script calls, the path that loads the
	// scripts on NOSCRIPT (a lone call falls back to EVAL instead).
	batch := []BatchJob{{Type: "t", Options: []Option{On("a")}}, {Type: "t", Options: []Option{On("b")}}}
	if _, err := c.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	loads.Store(0)
	const callers = 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	start := make(chan struct{})
	for range callers {
		wg.Go(func() {
			<-start
			_, err := c.EnqueueBatch(ctx, batch)
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("EnqueueBatch after the scripts were flushed: %v", err)
		}
	}
	for _, q := range []string{"a", "b"} {
		if n := rdb.LLen(ctx, c.keys.queue(q).ready).Val(); n != callers+1 {
			t.Errorf("queue %s has %d jobs ready, want %d", q, n, callers+1)
		}
	}
	// One load of each script; a caller whose NOSCRIPT came back just as that load ended
	// may start a second.
	if n, all := loads.Load(), int64(len(scripts.All)); n == 0 || n > 2*all {
		t.Errorf("%d callers sent %d SCRIPT LOADs for %d scripts, want one load of each (two at most)", callers, n, all)
	}
}

// loadCounter counts the SCRIPT LOAD commands a client sends.
type loadCounter struct{ n *atomic.Int64 }

func (h loadCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h loadCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h loadCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h loadCounter) count(cmd redis.Cmder) {
	if a := cmd.Args(); len(a) >= 2 && strings.EqualFold(cmd.Name(), "script") && strings.EqualFold(a[1].(string), "load") {
		h.n.Add(1)
	}
}
