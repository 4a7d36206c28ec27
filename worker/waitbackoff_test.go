package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// A wait that keeps failing while every other call succeeds (here: an ACL user without
// BLPOP) backs off like any Redis failure, instead of retrying every 100ms forever.
func TestFailingWaitBacksOff(t *testing.T) {
	if redistest.ClusterMode() {
		t.Skip("sets an ACL user on the single shared server")
	}
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	user := "noblpop-" + strings.ReplaceAll(redistest.Prefix(t), ":", "-")
	if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", "-blpop").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(ctx, "ACL", "DELUSER", user) })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: "pw"})
	t.Cleanup(func() { rdb.Close() })
	c, err := queue.NewClient(rdb, queue.Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	logger, logs := countingLogger(t, "wait failed")
	stop := startWorker(t, c, Config{Concurrency: 2, Handler: HandlerFunc(func(context.Context, *queue.Job) error { return nil }),
		Logger: logger})
	time.Sleep(1600 * time.Millisecond)
	stop()
	n := logs.n.Load()
	// Backing off 100, 200, 400, 800ms gives 4-5 attempts in 1.6s; a fixed 100ms, ~15.
	if n == 0 || n > 6 {
		t.Errorf("%d failed waits logged in 1.6s, want 1-6 (backing off)", n)
	}
}
