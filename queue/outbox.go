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

// outboxBatch is how many outbox entries one delivery reads.
const outboxBatch = 500

// Deliver delivers up to outboxBatch entries of queue's outbox, in two round trips (one
// pipelined resolve.lua per entry, then one HDEL of the delivered ones) after the read,
// and returns how many it delivered. An entry whose delivery failed stays, for the next
// call.
func (c broker) Deliver(ctx context.Context, queue string) (int, error) {
	qk := c.keys.queue(queue)
	fields, _, err := c.rdb.HScan(ctx, qk.outbox, 0, "", outboxBatch).Result()
	if err != nil {
		return 0, fmt.Errorf("outbox of %s: %w", queue, err)
	}
	var calls []*scriptCall
	var names []string
	for i := 0; i+1 < len(fields); i += 2 {
		parts := strings.Split(fields[i], "\t")
		if len(parts) != 4 || (parts[0] != "j" && parts[0] != "b") {
			continue // not ours: left for an operator to see
		}
		calls = append(calls, c.resolveCall(parts[0], JobRef{Queue: parts[1], ID: parts[2]},
			JobRef{Queue: queue, ID: parts[3]}, fields[i+1]))
		names = append(names, fields[i])
	}
	if len(calls) == 0 {
		return 0, nil
	}
	c.runScripts(ctx, nil, calls)
	var done []string
	var first error
	for k, call := range calls {
		if err := call.cmd.Err(); err != nil {
			first = cmpOr(first, err)
			continue
		}
		done = append(done, names[k])
	}
	if len(done) > 0 {
		if err := c.rdb.HDel(ctx, qk.outbox, done...).Err(); err != nil {
			return 0, fmt.Errorf("outbox of %s: %w", queue, err)
		}
	}
	if first != nil {
		return len(done), fmt.Errorf("outbox of %s: %d of %d not delivered: %w", queue, len(calls)-len(done), len(calls), first)
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
