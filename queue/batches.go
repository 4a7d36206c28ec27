package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/scripts"
)

// Batches: a set of jobs (in any queues) with callbacks, each itself a job enqueued in
// the batch's queue exactly once: on complete (every child ended), on success (every
// child done), on death (the first child died). The batch's hash and its SET of pending
// children live in its queue's slot (jobs:{q}:batch:<id>); each child carries its batch in
// its hash, and the scripts that end a job settle its batch in the same step, or through
// the outbox when the batch is in another slot (see follow in scripts/lib).

// BatchRef names a batch: its queue and ID. Written "queue/id".
type BatchRef struct {
	Queue string
	ID    string
}

// String is "queue/id".
func (r BatchRef) String() string { return r.Queue + "/" + r.ID }

// IsZero reports whether r names no batch.
func (r BatchRef) IsZero() bool { return r.ID == "" }

// Callback is a batch callback: a job of this type enqueued on the batch's queue when the
// batch's event happens, with ID "<batch>.<complete|success|death>". An empty Payload
// gives the batch's counts then as JSON: {"batch","queue","event","total","done","dead"}.
type Callback struct {
	Type    string
	Payload []byte
}

// BatchOptions configure a new batch. Every callback is optional.
type BatchOptions struct {
	// Queue holds the batch and its callbacks. Default: "default".
	Queue string
	// ID names the batch (default: generated). Children given no ID of their own get
	// "<batch>.<n>" (n: their index), so creating the same batch again after a crash
	// half-way completes it instead of making a second one.
	ID         string
	OnComplete *Callback // every child ended, done or dead
	OnSuccess  *Callback // every child done (never fires when one died)
	OnDeath    *Callback // the first child died
}

// Batch states.
const (
	BatchCreating  = "creating"  // its children are being enqueued; it cannot end yet
	BatchRunning   = "running"   // sealed: it ends when its last pending child ends
	BatchSucceeded = "succeeded" // every child done
	BatchCompleted = "completed" // every child ended, and at least one died
)

// BatchStatus is a batch as stored. JSON field names are `jobs batch inspect --json`'s.
type BatchStatus struct {
	ID        string                    `json:"id"`
	Queue     string                    `json:"queue"`
	State     string                    `json:"state"`
	Total     int64                     `json:"total"`
	Pending   int64                     `json:"pending"`
	Done      int64                     `json:"done"`
	Dead      int64                     `json:"dead"`
	Callbacks map[string]CallbackStatus `json:"callbacks"`
}

// CallbackStatus is one callback of a batch: its job type, and the ID of its job once
// fired.
type CallbackStatus struct {
	Type  string `json:"type"`
	Fired bool   `json:"fired"`
	Job   string `json:"job,omitempty"`
}

// batchMembers is how many children one batch.lua call adds.
const batchMembers = 1000

// NewBatch creates a batch of jobs with callbacks: the batch is created (state creating),
// its children registered as pending and enqueued (each in its own queue, as
// EnqueueBatch would), then the batch is sealed (running), and it ends when its last
// child ends; a batch whose children all ended before the seal ends at the seal. The
// results are EnqueueBatch's, one per job. A batch that could not enqueue every child is
// left creating (it cannot end) and the error says so: calling NewBatch again with the
// same ID and jobs completes it.
func (c *Client) NewBatch(ctx context.Context, o BatchOptions, jobs []BatchJob) (BatchRef, []BatchResult, error) {
	ref := BatchRef{Queue: o.Queue, ID: o.ID}
	if ref.Queue == "" {
		ref.Queue = DefaultQueue
	}
	if err := ValidateQueue(ref.Queue); err != nil {
		return ref, nil, err
	}
	if ref.ID == "" {
		ref.ID = c.ids.next(time.Now())
	} else if err := validateID(ref.ID); err != nil {
		return ref, nil, err
	}
	var cbs []any
	for _, cb := range []struct {
		kind string
		cb   *Callback
	}{{"complete", o.OnComplete}, {"success", o.OnSuccess}, {"death", o.OnDeath}} {
		if cb.cb == nil {
			continue
		}
		if err := ValidateType(cb.cb.Type); err != nil {
			return ref, nil, fmt.Errorf("%s callback: %w", cb.kind, err)
		}
		if len(cb.cb.Payload) > c.cfg.MaxPayload {
			return ref, nil, fmt.Errorf("%s callback: %w", cb.kind, ErrPayloadTooLarge)
		}
		cbs = append(cbs, cb.kind, cb.cb.Type, cb.cb.Payload)
	}
	prep, err := c.prepareChildren(ref, jobs, true)
	if err != nil {
		return ref, nil, err
	}
	// The batch's queue is known (FindBatch, jobs stats) even when no child is on it.
	if fresh := c.register([]string{ref.Queue}); len(fresh) > 0 {
		if err := c.rdb.SAdd(ctx, c.keys.queues(), ref.Queue).Err(); err != nil {
			return ref, nil, fmt.Errorf("batch %s: %w", ref, err)
		}
		c.known.Store(ref.Queue, time.Now())
	}
	if err := c.batchCall(ctx, ref, "create", cbs, prep); err != nil {
		return ref, nil, err
	}
	inCall := registerInCall(prep)
	res := c.enqueuePrepared(ctx, prep)
	c.link(ctx, prep, res, inCall)
	if err := batchError(res); err != nil {
		return ref, res, fmt.Errorf("batch %s left creating (create it again with the same ID to complete it): %w", ref, err)
	}
	if err := c.batchCall(ctx, ref, "seal", nil, nil); err != nil {
		return ref, res, err
	}
	return ref, res, nil
}

// BatchAdd adds jobs to a batch that has not ended: a running child may add jobs to its
// own batch (job.Batch), which cannot end meanwhile since that child is pending. Each job
// is registered as pending, then enqueued. Give the jobs IDs derived from the adding
// job's (for example its ID and an index) so that a handler that runs again adds the same
// jobs, not new ones. A batch that has ended refuses with ErrState.
func (c *Client) BatchAdd(ctx context.Context, ref BatchRef, jobs []BatchJob) ([]BatchResult, error) {
	if err := ValidateQueue(ref.Queue); err != nil {
		return nil, err
	}
	prep, err := c.prepareChildren(ref, jobs, false)
	if err != nil {
		return nil, err
	}
	if err := c.batchCall(ctx, ref, "add", nil, prep); err != nil {
		return nil, err
	}
	inCall := registerInCall(prep)
	res := c.enqueuePrepared(ctx, prep)
	c.link(ctx, prep, res, inCall)
	return res, batchError(res)
}

// prepareChildren validates a batch's jobs and marks them as its children. named: give
// the jobs without an ID "<batch>.<n>".
func (c *Client) prepareChildren(ref BatchRef, jobs []BatchJob, named bool) ([]prepared, error) {
	now := time.Now()
	prep := make([]prepared, len(jobs))
	for i, bj := range jobs {
		if named {
			if o, err := resolve(bj.Options); err == nil && o.id == "" {
				bj.Options = append(append([]Option(nil), bj.Options...), ID(ref.ID+"."+strconv.Itoa(i)))
			}
		}
		p, err := c.prepare(bj, now)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		p.o.batch = ref.Queue + "\t" + ref.ID
		prep[i] = p
	}
	return prep, nil
}

// batchCall runs batch.lua: mode create (with callbacks cbs), add or seal, with the
// children of prep as new pending members, batchMembers per call.
func (c *Client) batchCall(ctx context.Context, ref BatchRef, mode string, cbs []any, prep []prepared) error {
	qk := c.queueKeys(ref.Queue)
	keys := []string{qk.batch(ref.ID), qk.batchPending(ref.ID), qk.events}
	for start := 0; start == 0 || start < len(prep); start += batchMembers {
		args := []any{qk.jobPrefix, ref.ID, mode, ms(c.cfg.DeadRetention), c.eventsMax(), len(cbs) / 3}
		args = append(args, cbs...)
		for _, p := range prep[start:min(start+batchMembers, len(prep))] {
			args = append(args, p.o.queue+"\t"+p.id)
		}
		st, err := c.run(ctx, scripts.Batch, keys, args...).Text()
		if err != nil {
			return fmt.Errorf("batch %s: %s: %w", ref, mode, outcome(ctx, "batch", err))
		}
		switch {
		case st == "missing":
			return batchNotFound(ref.String())
		case len(st) > 6 && st[:6] == "ended:":
			return fmt.Errorf("batch %s: %w: it has %s", ref, ErrState, st[6:])
		case len(st) > 7 && st[:7] == "exists:":
			return fmt.Errorf("batch %s: %w: it exists and is %s", ref, ErrDuplicate, st[7:])
		}
		if mode == "create" {
			mode, cbs = "add", nil // the next chunks add to the batch just created
		}
	}
	return nil
}

// BatchStatus returns a batch's state and counts. An unknown batch (or one ended longer
// than Config.DeadRetention ago) is ErrNotFound. One round trip.
func (c *Client) BatchStatus(ctx context.Context, ref BatchRef) (*BatchStatus, error) {
	if err := ValidateQueue(ref.Queue); err != nil {
		return nil, err
	}
	qk := c.queueKeys(ref.Queue)
	pipe := c.rdb.Pipeline()
	h := pipe.HGetAll(ctx, qk.batch(ref.ID))
	n := pipe.SCard(ctx, qk.batchPending(ref.ID))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("batch %s: %w", ref, err)
	}
	f := h.Val()
	if len(f) == 0 {
		return nil, batchNotFound(ref.String())
	}
	num := func(k string) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	s := &BatchStatus{ID: ref.ID, Queue: ref.Queue, State: f["state"], Total: num("total"), Pending: n.Val(),
		Done: num("done"), Dead: num("dead"), Callbacks: map[string]CallbackStatus{}}
	for _, kind := range []string{"complete", "success", "death"} {
		typ, ok := f["cb:"+kind+":type"]
		if !ok {
			continue
		}
		job, fired := f["fired:"+kind]
		s.Callbacks[kind] = CallbackStatus{Type: typ, Fired: fired && job != "", Job: job}
	}
	return s, nil
}

// FindBatch is BatchStatus for a batch whose queue is not known: it looks in every known
// queue, in one round trip.
func (c *Client) FindBatch(ctx context.Context, id string) (*BatchStatus, error) {
	qs, err := c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	pipe := c.rdb.Pipeline()
	found := make([]*redis.IntCmd, len(qs))
	for i, q := range qs {
		found[i] = pipe.Exists(ctx, c.queueKeys(q).batch(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("find batch %s: %w", id, err)
	}
	for i, q := range qs {
		if found[i].Val() == 1 {
			return c.BatchStatus(ctx, BatchRef{Queue: q, ID: id})
		}
	}
	return nil, batchNotFound(id)
}

// batchNotFound is ErrNotFound for a batch, saying so: "job not found" named the wrong thing.
func batchNotFound(batch string) error { return notFoundError("batch " + batch) }

// notFoundError is ErrNotFound (errors.Is) for something other than a job.
type notFoundError string

func (e notFoundError) Error() string {
	return "queue: " + string(e) + " not found (never made, or its retention ran out)"
}

func (e notFoundError) Is(target error) bool { return target == ErrNotFound }
