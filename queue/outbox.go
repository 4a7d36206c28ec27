package queue

import (
	"context"
	"fmt"
	"strings"
)

// The outbox: when a job ends, the script that ends it resolves what waits on it in its
// own slot at once; a waiting job or a batch in another queue (on a Redis Cluster, maybe
// another node) gets an entry in the ended job's queue's outbox instead, a HASH field
// "j\tqueue\tid\tsource" (a dependent) or "b\tqueue\tbatch\tsource" (a batch), value the
// outcome (done, dead). Workers of that queue deliver the entries: resolve.lua in the
// target's slot (idempotent: a set member's SREM is its guard), and only then HDEL of the
// entry, so a delivery that fails, or a worker that dies half-way, leaves the entry for
// the next one. The script that writes an entry pushes an 'o' wake token, and each reap
// says whether the outbox holds entries (about once a second), so a delivery waits at
// most for a worker to be idle, or about a second.

// ReapDeliver is Reap, then Deliver when the reap found entries in the queue's outbox
// (reap.lua says so, at no extra round trip), for the worker's periodic upkeep.
func (c broker) ReapDeliver(ctx context.Context, queue string) (reaped, delivered int, err error) {
	reaped, outbox, err := c.reap(ctx, queue)
	if err != nil || !outbox {
		return reaped, 0, err
	}
	delivered, err = c.Deliver(ctx, queue)
	return reaped, delivered, err
}

// outboxPage is how many outbox entries one HSCAN asks for, and outboxPages how many
// pages one delivery reads at most (the rest waits for the next: about a second later,
// or at once on an idle worker's wake token).
const (
	outboxPage  = 1000
	outboxPages = 10
)

// Deliver delivers the entries of queue's outbox (up to outboxPages pages of
// outboxPage): the entries of one target and outcome (a batch's children, say) in one
// resolve.lua call, every call pipelined in one round trip per page, then one HDEL of
// the delivered entries. It returns how many it delivered. An entry whose delivery
// failed stays, for the next call.
func (c broker) Deliver(ctx context.Context, queue string) (int, error) {
	qk := c.keys.queue(queue)
	delivered := 0
	var cursor uint64
	for page := 0; page < outboxPages; page++ {
		fields, next, err := c.rdb.HScan(ctx, qk.outbox, cursor, "", outboxPage).Result()
		if err != nil {
			return delivered, fmt.Errorf("outbox of %s: %w", queue, err)
		}
		n, err := c.deliverPage(ctx, qk, queue, fields)
		delivered += n
		if err != nil {
			return delivered, err
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	return delivered, nil
}

// deliverPage delivers one HSCAN page of outbox entries (field, value, field, value...).
func (c broker) deliverPage(ctx context.Context, qk queueKeys, queue string, fields []string) (int, error) {
	type group struct {
		kind    string
		target  JobRef
		outcome string
		sources []JobRef
		names   []string
	}
	var groups []*group
	at := map[string]*group{}
	for i := 0; i+1 < len(fields); i += 2 {
		parts := strings.Split(fields[i], "\t")
		if len(parts) != 4 || (parts[0] != "j" && parts[0] != "b") {
			continue // not ours: left for an operator to see
		}
		key := parts[0] + "\t" + parts[1] + "\t" + parts[2] + "\t" + fields[i+1]
		g := at[key]
		if g == nil {
			g = &group{kind: parts[0], target: JobRef{Queue: parts[1], ID: parts[2]}, outcome: fields[i+1]}
			at[key] = g
			groups = append(groups, g)
		}
		g.sources = append(g.sources, JobRef{Queue: queue, ID: parts[3]})
		g.names = append(g.names, fields[i])
	}
	if len(groups) == 0 {
		return 0, nil
	}
	calls := make([]*scriptCall, len(groups))
	for k, g := range groups {
		calls[k] = c.resolveCall(g.kind, g.target, g.outcome, g.sources...)
	}
	c.runScripts(ctx, nil, calls)
	var done []string
	var first error
	failed := 0
	for k, call := range calls {
		if err := call.cmd.Err(); err != nil {
			first = cmpOr(first, err)
			failed += len(groups[k].names)
			continue
		}
		done = append(done, groups[k].names...)
	}
	if len(done) > 0 {
		if err := c.rdb.HDel(ctx, qk.outbox, done...).Err(); err != nil {
			return 0, fmt.Errorf("outbox of %s: %w", queue, err)
		}
	}
	if first != nil {
		return len(done), fmt.Errorf("outbox of %s: %d of %d not delivered: %w", queue, failed, failed+len(done), first)
	}
	return len(done), nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Undelivered returns how many ends of queue's jobs are still to be delivered to
// dependents and batches in other queues (its outbox's entries): a test that waits for a
// workflow to settle waits for 0 too.
func (c *Client) Undelivered(ctx context.Context, queue string) (int64, error) {
	if err := ValidateQueue(queue); err != nil {
		return 0, err
	}
	n, err := c.rdb.HLen(ctx, c.queueKeys(queue).outbox).Result()
	if err != nil {
		return 0, fmt.Errorf("outbox of %s: %w", queue, err)
	}
	return n, nil
}
