package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobs-dev/jobs/internal/errtext"
)

// EventName says what one transition did to a job, or to a queue.
type EventName string

// The events. Every script that changes a job's state appends one to its queue's stream
// in the same atomic step, so an event exists exactly for each change that committed, in
// commit order per queue. Promotion (a scheduled or retry job becoming due) writes none:
// the scheduled or retry event announced it, and the next event (started, cancelled)
// shows it happened.
const (
	EventWaiting    EventName = "waiting"     // a new job waits for its dependencies (After); enqueued follows when they ended
	EventEnqueued   EventName = "enqueued"    // a new job is ready (or a waiting one, its dependencies ended; or a batch's callback)
	EventScheduled  EventName = "scheduled"   // a new job waits for its run time
	EventStarted    EventName = "started"     // a worker claimed it: an attempt began (a job claimed ahead starts here, before its handler)
	EventDone       EventName = "done"        // the attempt succeeded
	EventRetry      EventName = "retry"       // the attempt failed; the job waits for the next one
	EventDead       EventName = "dead"        // failed for good, or ended after an operator's cancel
	EventReaped     EventName = "reaped"      // its worker stopped renewing the lease; back to the head of ready (with none left: dead instead)
	EventHandedBack EventName = "handed_back" // given back unrun, attempt uncounted (a stopping worker, a job claimed ahead that waited too long)
	EventPostponed  EventName = "postponed"   // given back unrun to run later, with the reason as Error (exclusive lock held, no handler)
	EventCancelled  EventName = "cancelled"   // an operator cancelled it: a waiting job is dead now, a running one ends dead
	EventRequeued   EventName = "requeued"    // an operator made it ready again (Retry, `jobs retry`)
	EventPurged     EventName = "purged"      // an operator deleted jobs (Purge): one event per batch of up to 1000, ID empty, Error says how many
	EventDeleted    EventName = "deleted"     // an operator deleted this one job (Delete)
	EventPaused     EventName = "paused"      // the queue was paused (ID empty)
	EventResumed    EventName = "resumed"     // the queue was resumed (ID empty), or a limit key a handler paused (Error: "limit key K")
	EventLimit      EventName = "limit"       // the queue's limits changed (ID empty; Error says the limits now, "" when none is left)
)

// EventNames lists every event name, in the order of a job's life, then the queue's.
var EventNames = []EventName{EventWaiting, EventEnqueued, EventScheduled, EventStarted, EventDone, EventRetry,
	EventDead, EventReaped, EventHandedBack, EventPostponed, EventCancelled, EventRequeued, EventPurged,
	EventDeleted, EventPaused, EventResumed, EventLimit}

// Event is one entry of a queue's event stream (`jobs:{queue}:events`).
type Event struct {
	Queue   string
	Name    EventName
	ID      string // the job's ID; empty for paused and resumed
	Type    string
	Attempt int    // the attempt the event is about (0 before the first)
	Worker  string // the worker of that attempt, when one was involved
	Error   string // one line of at most 200 bytes: the failure, the postpone reason
	At      time.Time
	// Cursor is where a reader stands after this event: pass it to [Client.Events] to
	// resume right after it, losing nothing the stream still holds and repeating nothing.
	// A stream entry holds the events of one call (a worker's acks and claims of one
	// round trip, a batch enqueue): after the entry's last event the cursor is the entry's
	// ID ("1733380000123-0"); after an earlier one, the ID and how many of its events were
	// read ("1733380000123-0/3": the first 3). Reading several queues, it is every queue's
	// position ("default=1733380000123-0/3,emails=1733380000099-3").
	Cursor string

	sid  streamID // the entry's ID in its queue's stream
	idx  int      // the event's place in its entry: 0 for the first
	last bool     // the entry's last event
}

// position is where a reader stands after e.
func (e Event) position() position {
	if e.last {
		return position{id: e.sid, checked: true}
	}
	return position{id: e.sid, read: e.idx + 1, checked: true}
}

// eventJSON is `jobs tail --json`'s line.
type eventJSON struct {
	Queue   string    `json:"queue"`
	Event   EventName `json:"event"`
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Attempt int       `json:"attempt"`
	Worker  string    `json:"worker"`
	Error   string    `json:"error"`
	At      time.Time `json:"at"`
	Cursor  string    `json:"cursor"`
}

// MarshalJSON renders the event as `jobs tail --json` prints it: every field always
// present, at in RFC 3339 (UTC).
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(eventJSON{Queue: e.Queue, Event: e.Name, ID: e.ID, Type: e.Type,
		Attempt: e.Attempt, Worker: e.Worker, Error: e.Error, At: e.At.UTC(), Cursor: e.Cursor})
}

// ErrEventsGap: a reader fell so far behind a queue's event stream that Redis dropped
// events it had not read yet (the stream keeps about Config.Events). The error is a
// *GapError, which says where the reader stood and how to go on.
var ErrEventsGap = errors.New("queue: events lost: the reader fell behind the capped stream")

// GapError is the error [Client.Events] ends with when events were lost.
type GapError struct {
	Queue  string // the queue whose events were lost
	Cursor string // where the reader stood: the last event it delivered (as Event.Cursor)
	First  string // the oldest entry the stream still holds
	Resume string // a cursor that goes on from First, accepting the loss
}

func (e *GapError) Error() string {
	return fmt.Sprintf("%v: queue %s: read up to %s, the stream now starts at %s (resume from %s to go on)",
		ErrEventsGap, e.Queue, e.Cursor, e.First, e.Resume)
}

// Unwrap makes errors.Is(err, ErrEventsGap) hold.
func (e *GapError) Unwrap() error { return ErrEventsGap }

// Events follows the event streams of queues (every known queue when none is given): it
// yields the events after from, in commit order per queue, and then waits for new ones
// with blocking reads (no polling) until ctx ends or the loop stops. On a Redis Cluster,
// where queues live on different nodes, it reads each queue on its own node at once.
// Following every queue, it also takes up the queues created while it runs, from their
// first event: it reads the queue set again every eventsQueuesEvery (2s).
//
// from is a cursor: "" or "$" for new events only; "0" for everything the streams still
// hold; an Event.Cursor or an entry ID ("1733380000123-0") to resume right after it (an
// entry ID with "/k", k >= 1, as Event.Cursor has inside an entry: after its first k
// events); or a time in Unix milliseconds ("1733380000123") for the events from then
// on, whatever the streams still hold of them (no gap is reported before the first).
// Resuming every queue from a several-queue cursor, a queue the cursor does not name
// (created after it was written) is read from its start; a queue given in queues that
// the cursor does not name starts with new events. A malformed cursor is an error
// wrapping ErrInvalid (see [ValidateCursor]).
//
// The sequence ends with one error: ctx's when it ends (errors.Is(err,
// context.DeadlineExceeded) after its deadline), a Redis error, or a *GapError
// (errors.Is ErrEventsGap) when Redis dropped events this reader had not read yet: a
// resumed reader never skips events silently. After a Redis error (a restart, a lost
// connection), call Events again from the last event's Cursor: nothing is lost that the
// streams still hold (see the example). The events are the ones written by every Client
// whose Config.Events is not negative, whatever this Client's setting.
func (c *Client) Events(ctx context.Context, queues []string, from string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		everyQueue := len(queues) == 0
		cur, err := c.startCursor(ctx, queues, from)
		if err != nil {
			yield(Event{}, cmp.Or(ctxEnded(ctx), err))
			return
		}
		// The readers of one generation share rctx and out; a new queue on a single node
		// starts a new generation (one XREAD spans every queue there), whose readers
		// resume from cur, what this loop delivered.
		var gen struct {
			ctx  context.Context
			stop context.CancelFunc
			out  chan readOut
		}
		newGeneration := func() {
			gen.ctx, gen.stop = context.WithCancel(ctx)
			gen.out = make(chan readOut)
		}
		newGeneration()
		defer func() { gen.stop() }()
		followFrom := func(qs []string) {
			for _, group := range c.eventGroups(qs) {
				pos := make(map[string]position, len(group))
				for _, q := range group {
					pos[q] = cur.pos[q]
				}
				go c.follow(gen.ctx, group, pos, gen.out)
			}
		}
		followFrom(cur.queues)
		var queueSet <-chan time.Time
		if everyQueue {
			t := time.NewTicker(eventsQueuesEvery)
			defer t.Stop()
			queueSet = t.C
		}
		for {
			var r readOut
			select {
			case r = <-gen.out:
			case <-queueSet:
				added, err := c.addNewQueues(ctx, &cur)
				if err != nil {
					yield(Event{}, cmp.Or(ctxEnded(ctx), err))
					return
				}
				switch {
				case len(added) == 0:
				case c.clusterWait != nil: // one reader per queue already
					followFrom(added)
				default:
					gen.stop()
					newGeneration()
					followFrom(cur.queues)
				}
				continue
			case <-ctx.Done():
				yield(Event{}, ctx.Err())
				return
			}
			if r.gap != nil {
				r.gap.Cursor = cur.String()
				p := cur.pos[r.gap.Queue]
				cur.pos[r.gap.Queue] = position{id: r.gapFirst.prev(), checked: p.checked}
				r.gap.Resume = cur.String()
				yield(Event{}, r.gap)
				return
			}
			if r.err != nil {
				// A read cut by ctx's deadline is ctx's end, not a Redis error.
				yield(Event{}, cmp.Or(ctxEnded(ctx), r.err))
				return
			}
			for _, e := range r.events {
				cur.pos[e.Queue] = e.position()
				e.Cursor = cur.String()
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}

// eventsQueuesEvery is how often a reader of every queue reads the queue set again
// (jobs:queues, one SMEMBERS) to follow the queues created since. As eventsBlock: an idle
// reader sends its blocking XREAD again that often anyway, so an idle reader makes one
// more small call per round, and a new queue's first events show within about 2s (none
// is lost: a new queue is read from its start).
const eventsQueuesEvery = eventsBlock

// addNewQueues adds the known queues cur does not follow yet to it, each at its stream's
// start (gap checked: events trimmed before this reader saw the queue are reported), and
// returns them.
func (c *Client) addNewQueues(ctx context.Context, cur *cursor) ([]string, error) {
	known, err := c.Queues(ctx)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	var added []string
	for _, q := range known {
		if _, ok := cur.pos[q]; ok || ValidateQueue(q) != nil {
			continue
		}
		cur.pos[q] = position{checked: true}
		added = append(added, q)
	}
	if len(added) > 0 {
		cur.queues = append(cur.queues, added...)
		slices.Sort(cur.queues)
	}
	return added, nil
}

// position is where a reader stands in one queue's stream: after entry id, or, when read
// > 0, inside it, after its first read events (an entry holds one call's events). checked:
// a stream whose oldest entry is past id has lost events this reader wanted (see
// gapAfter); false only for "0", which asks for whatever the stream holds.
type position struct {
	id      streamID
	read    int
	checked bool
}

// String is the position as a cursor shows it: "ms-seq", or "ms-seq/k" inside an entry.
func (p position) String() string {
	if p.read > 0 {
		return p.id.String() + "/" + strconv.Itoa(p.read)
	}
	return p.id.String()
}

// cursor is every followed queue's position, in queue order.
type cursor struct {
	queues []string
	pos    map[string]position
}

// String is the cursor as Event.Cursor shows it.
func (c cursor) String() string {
	if len(c.queues) == 1 {
		return c.pos[c.queues[0]].String()
	}
	parts := make([]string, len(c.queues))
	for i, q := range c.queues {
		parts[i] = q + "=" + c.pos[q].String()
	}
	return strings.Join(parts, ",")
}

// ValidateCursor reports whether from is a cursor [Client.Events] takes, without reading
// Redis: "", "$", "0", an entry ID ("1733380000123-0"), an entry ID inside which to
// resume ("1733380000123-0/3": after its first 3 events), a time in Unix milliseconds,
// or queue=position pairs separated by commas, as Event.Cursor. The error wraps
// ErrInvalid.
func ValidateCursor(from string) error {
	_, _, err := parseCursor(from)
	return err
}

// parseCursor reads a cursor (see Events): the positions a several-queue cursor names, or
// the one position of every queue (nil: new events only).
func parseCursor(from string) (named map[string]position, all *position, err error) {
	named = map[string]position{}
	switch from = strings.TrimSpace(from); {
	case from == "" || from == "$":
	case from == "0" || from == "0-0":
		all = &position{} // no gap check before the first event
	case strings.Contains(from, "="):
		for _, part := range strings.Split(from, ",") {
			q, id, _ := strings.Cut(part, "=")
			p, ok := parsePosition(id)
			if err := ValidateQueue(q); err != nil || !ok {
				return nil, nil, invalid("cursor %q: want queue=ID,queue=ID,... (as Event.Cursor; an ID may end in /k, k >= 1)", from)
			}
			named[q] = p
		}
	case !strings.ContainsAny(from, "-/"):
		// A time, not a position: the events from that millisecond on, whatever the
		// streams still hold of them.
		sid, ok := parseStreamID(from)
		if !ok {
			return nil, nil, invalid("cursor %q: want \"$\", \"0\", an entry ID such as 1733380000123-0, or an event's cursor", from)
		}
		all = &position{id: streamID{sid.ms, 0}.prev()}
	default:
		p, ok := parsePosition(from)
		if !ok {
			return nil, nil, invalid("cursor %q: want \"$\", \"0\", an entry ID such as 1733380000123-0, or an event's cursor (1733380000123-0/3: after the entry's first 3 events)", from)
		}
		all = &p
	}
	return named, all, nil
}

// parsePosition reads a position of a cursor: "ms-seq" (or "ms", as ms-0), or "ms-seq/k"
// with k >= 1. checked is set: a reader resuming from a position wants to know of a gap.
func parsePosition(s string) (position, bool) {
	idPart, readPart, inside := strings.Cut(s, "/")
	if inside && !strings.Contains(idPart, "-") {
		return position{}, false
	}
	sid, ok := parseStreamID(idPart)
	if !ok {
		return position{}, false
	}
	p := position{id: sid, checked: true}
	if inside {
		k, err := strconv.Atoi(readPart)
		if err != nil || k < 1 || strconv.Itoa(k) != readPart {
			return position{}, false
		}
		p.read = k
	}
	return p, true
}

// startCursor resolves from (see Events) into a position for each queue.
func (c *Client) startCursor(ctx context.Context, queues []string, from string) (cursor, error) {
	named, all, err := parseCursor(from)
	if err != nil {
		return cursor{}, err
	}
	everyQueue := len(queues) == 0
	if everyQueue {
		var err error
		if queues, err = c.Queues(ctx); err != nil {
			return cursor{}, err
		}
		for q := range named {
			queues = append(queues, q)
		}
		if len(queues) == 0 {
			return cursor{}, errors.New("events: no queue to follow yet (no job was ever enqueued): name one")
		}
	}
	queues = slices.Clone(queues)
	slices.Sort(queues)
	queues = slices.Compact(queues)
	cur := cursor{queues: queues, pos: make(map[string]position, len(queues))}
	var latest []string // queues that start with new events
	for _, q := range queues {
		if err := ValidateQueue(q); err != nil {
			return cursor{}, err
		}
		switch p, ok := named[q]; {
		case ok:
			cur.pos[q] = p
		case all != nil:
			cur.pos[q] = *all
		case everyQueue && len(named) > 0:
			// Created after the cursor was written: nothing of it was read yet.
			cur.pos[q] = position{checked: true}
		default:
			latest = append(latest, q)
		}
	}
	if len(latest) > 0 {
		ids, err := c.lastEventIDs(ctx, latest)
		if err != nil {
			return cursor{}, err
		}
		for i, q := range latest {
			cur.pos[q] = position{id: ids[i], checked: true}
		}
	}
	return cur, nil
}

// eventGroups splits queues into the sets one XREAD can read: all of them on one node,
// one per queue on a cluster (a multi-key command must stay in one slot).
func (c *Client) eventGroups(queues []string) [][]string {
	if c.clusterWait == nil {
		return [][]string{queues}
	}
	groups := make([][]string, len(queues))
	for i, q := range queues {
		groups[i] = []string{q}
	}
	return groups
}

// streamID is a stream entry's ID: milliseconds of Redis's clock, and a sequence number.
type streamID struct{ ms, seq uint64 }

// parseStreamID reads "ms-seq" or "ms".
func parseStreamID(s string) (streamID, bool) {
	msPart, seqPart, hasSeq := strings.Cut(s, "-")
	ms, err := strconv.ParseUint(msPart, 10, 64)
	if err != nil {
		return streamID{}, false
	}
	var seq uint64
	if hasSeq {
		if seq, err = strconv.ParseUint(seqPart, 10, 64); err != nil {
			return streamID{}, false
		}
	}
	return streamID{ms, seq}, true
}

func (a streamID) String() string {
	return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10)
}

func (a streamID) compare(b streamID) int {
	return cmp.Or(cmp.Compare(a.ms, b.ms), cmp.Compare(a.seq, b.seq))
}

// next is the smallest ID after a; prev the largest before it (0-0 has none: itself).
func (a streamID) next() streamID {
	if a.seq == ^uint64(0) {
		return streamID{a.ms + 1, 0}
	}
	return streamID{a.ms, a.seq + 1}
}

func (a streamID) prev() streamID {
	switch {
	case a.seq > 0:
		return streamID{a.ms, a.seq - 1}
	case a.ms > 0:
		return streamID{a.ms - 1, ^uint64(0)}
	}
	return a
}

// maxShortError bounds the error text of an event and of an attempt's record.
const maxShortError = 200

// shortError is the one line of a job's error that says most (see internal/errtext), at
// most maxShortError bytes: what an event and the attempt history keep of it.
func shortError(reason string) string {
	s := errtext.Summary(reason)
	if len(s) <= maxShortError {
		return s
	}
	cut := maxShortError - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// eventSafe replaces the tabs and newlines in a worker ID, which the scripts write between
// the values and the events of an entry (see decodeEntry): generated worker IDs have none,
// so this costs a scan.
func eventSafe(worker string) string {
	if !strings.ContainsAny(worker, "\t\n") {
		return worker
	}
	return strings.NewReplacer("\t", " ", "\n", " ").Replace(worker)
}

// eventsMax is the scripts' events_max argument: 0 writes no events.
func (c *Client) eventsMax() int {
	return max(c.cfg.Events, 0)
}
