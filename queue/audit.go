package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/scripts"
)

// AuditMax is about how many entries the audit log keeps (the oldest go first).
const AuditMax = 10_000

// AuditEntry is one operator action in the audit log (jobs:{audit}:log). JSON field names
// are the dashboard's /audit contract.
type AuditEntry struct {
	// At is when it was logged (Redis's clock); ID is its stream entry ID.
	At time.Time `json:"at"`
	ID string    `json:"id"`
	// Who is the operator: the user the dashboard authenticated, else the client's address.
	Who string `json:"who"`
	// Action is what was done: retry, cancel, delete, run, pause, resume, retry-dead, purge,
	// quiet, stop, cron-trigger, cron-remove; selected-<action> for the jobs checked on a
	// list page, matching-<action> for one batch of the jobs matching a filter.
	Action string `json:"action"`
	Queue  string `json:"queue"`
	// Target is the job ID, process ID or state acted on ("" for the whole queue).
	Target string `json:"target"`
	// Count is how many jobs the action changed.
	Count int `json:"count"`
	// Detail is the outcome: empty on success, else the error.
	Detail string `json:"detail"`
}

// Audit appends e to the audit log (its At and ID are set by Redis), keeping about
// AuditMax entries.
func (c *Client) Audit(ctx context.Context, e AuditEntry) error {
	return sent(ctx, "audit "+e.Action, func() error {
		return c.run(ctx, scripts.Audit, []string{c.keys.audit()}, AuditMax, e.Who, e.Action, e.Queue, e.Target,
			e.Count, e.Detail).Err()
	})
}

// AuditLog returns up to n entries of the audit log, newest first, older than before (an
// entry ID; "" for the newest).
func (c *Client) AuditLog(ctx context.Context, before string, n int) ([]AuditEntry, error) {
	if n <= 0 || n > MaxPage {
		return nil, invalid("audit entries %d: want 1 to %d", n, MaxPage)
	}
	end := "+"
	if before != "" {
		if _, ok := parseStreamID(before); !ok {
			return nil, invalid("audit cursor %q: want an entry ID such as 1733380000000-0", before)
		}
		end = "(" + before
	}
	msgs, err := c.rdb.XRevRangeN(ctx, c.keys.audit(), end, "-", int64(n)).Result()
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	out := make([]AuditEntry, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, auditEntry(m))
	}
	return out, nil
}

func auditEntry(m redis.XMessage) AuditEntry {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	e := AuditEntry{ID: m.ID, Who: s("who"), Action: s("action"), Queue: s("queue"), Target: s("target"),
		Detail: s("detail")}
	e.Count, _ = strconv.Atoi(s("count"))
	if sid, ok := parseStreamID(m.ID); ok {
		e.At = time.UnixMilli(int64(sid.ms)).UTC()
	}
	return e
}
