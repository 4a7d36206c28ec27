package queue

import (
	"context"
	"errors"
	"fmt"
)

// Wait blocks until the job id of queue is done or dead, and returns it then; a job that
// is finished already is returned at once. It returns ErrNotFound for a job that does not
// exist or is purged meanwhile, and ctx's error when ctx ends first.
//
// Wait follows the queue's event stream (see [Client.Events]), so the workers must write
// events (their Config.Events not negative). It notes the stream's position before it
// reads the job, so the job's end cannot fall between the two; if the reader falls
// behind the stream, it reads the job again. Each call reads every event of the queue:
// to wait for many jobs, follow Events once instead. A job acked with
// Config.DoneRetention < 0 is deleted at once: Wait then returns it built from its done
// event (ID, queue, type, attempt, worker, finish time).
func (c *Client) Wait(ctx context.Context, queue, id string) (*Job, error) {
	if err := ValidateQueue(queue); err != nil {
		return nil, err
	}
	last, err := c.lastEventIDs(ctx, []string{queue})
	if err != nil {
		return nil, waitErr(ctx, id, err)
	}
	from := last[0].String()
	if j, err := c.Get(ctx, queue, id); err != nil || finished(j) {
		return j, waitErr(ctx, id, err)
	}
	for {
		var gap *GapError
		for e, err := range c.Events(ctx, []string{queue}, from) {
			if errors.As(err, &gap) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("wait for %s: %w", id, err)
			}
			if e.ID != id && (e.Name != EventPurged || e.ID != "") {
				continue
			}
			switch e.Name {
			case EventDone, EventDead, EventCancelled, EventPurged, EventDeleted:
			default:
				continue
			}
			j, err := c.Get(ctx, queue, id)
			switch {
			case errors.Is(err, ErrNotFound) && e.Name == EventDone:
				return &Job{ID: id, Queue: queue, Type: e.Type, State: StateDone, Attempt: e.Attempt,
					Worker: e.Worker, FinishedAt: e.At}, nil
			case err != nil || finished(j):
				return j, waitErr(ctx, id, err)
			}
			// A cancel of a running job (its end comes later), or a purge of other jobs.
		}
		if gap == nil {
			return nil, fmt.Errorf("wait for %s: %w", id, errors.New("queue: events ended"))
		}
		// The job's end may be among the events lost: look at the job itself.
		if j, err := c.Get(ctx, queue, id); err != nil || finished(j) {
			return j, waitErr(ctx, id, err)
		}
		from = gap.Resume
	}
}

// finished reports whether j reached a final state.
func finished(j *Job) bool { return j.State == StateDone || j.State == StateDead }

// waitErr is err of a read of Wait for id, ctx's error when ctx ended meanwhile (a read
// cut by ctx's deadline fails with an i/o timeout: see ctxEnded); nil stays nil.
func waitErr(ctx context.Context, id string, err error) error {
	if err == nil || errors.Is(err, ErrNotFound) {
		return err
	}
	if cerr := ctxEnded(ctx); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("wait for %s: %w (%w)", id, cerr, err)
	}
	return err
}
