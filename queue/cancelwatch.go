package queue

import (
	"context"
	"fmt"
	"strings"

	"github.com/jobs-dev/jobs/internal/proto"
)

// WatchCancels calls fn for each cancel of an active job, as [Client.Cancel] announces
// it, and for each change of a queue's limits ([Client.SetLimit]: a notice with an empty
// ID), until ctx is done; it returns nil then. It returns an error only when it cannot
// subscribe in the first place (Redis unreachable, or an ACL that does not allow the
// channel). fn is called from one goroutine, in the order the notices arrive, for the
// cancels of every queue under the client's prefix; it should return quickly, since
// later notices wait for it.
//
// Notices are a pub/sub message on the channel "<prefix>:cancel" (KEYS.md), so they are
// best effort: a notice published while the subscription is down is lost (go-redis
// reconnects and subscribes again by itself). The worker's heartbeat still reports a
// cancelled job within a third of the lease, so a missed notice only delays the stop.
// A repeated Cancel of the same active job sends another notice.
//
// WatchCancels holds one Redis connection of its own (outside the client's pool) while it
// runs. It works with a single node, Sentinel, and a Redis Cluster, where a PUBLISH
// reaches the subscribers on every node.
func (c broker) WatchCancels(ctx context.Context, fn func(proto.CancelNotice)) error {
	ps := c.rdb.Subscribe(ctx, c.keys.cancelChannel())
	defer ps.Close()
	// go-redis cannot interrupt a blocked read by ctx: closing the subscription does.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	// The first reply confirms the subscription (or is the refusal).
	if _, err := ps.Receive(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watch cancels: %w", err)
	}
	msgs := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok { // closed: ctx is done
				return nil
			}
			if n, ok := parseCancelNotice(m.Payload); ok {
				fn(n)
			}
		}
	}
}

// parseCancelNotice decodes the channel's messages: cancel.lua's "<queue> <id>" (a queue
// name has no space, ValidateQueue, so the first space ends it), or limit.lua's "<queue>"
// alone, which says the queue's limits changed (a notice with an empty ID).
func parseCancelNotice(payload string) (proto.CancelNotice, bool) {
	q, id, ok := strings.Cut(payload, " ")
	if q == "" || ok && id == "" {
		return proto.CancelNotice{}, false
	}
	return proto.CancelNotice{Queue: q, ID: id}, true
}
