package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// eventsBatch is the most entries one read takes from each stream. An entry holds one
// call's events: one for a single job's transition, up to a batch's (a worker's acks and
// claims of one round trip, at most 2000), so a read stays bounded.
const eventsBatch = 100

// eventsBlock is how long one blocking read waits for a new event before it is sent
// again. It bounds how long a reader goroutine outlives the Events loop that stopped
// (go-redis cannot cancel a blocking command), not how soon an event is seen: a blocked
// XREAD returns as soon as an entry is added.
const eventsBlock = 2 * time.Second

// readOut is what a follow goroutine hands the Events loop: events in stream order, an
// error, or a gap (with the stream's first entry, for the resume cursor).
type readOut struct {
	events   []Event
	err      error
	gap      *GapError
	gapFirst streamID
}

// follow reads the streams of queues (one XREAD can span them: see eventGroups) from pos
// until ctx ends, sending what it reads to out. Each read is a MULTI of XINFO STREAM and
// a non-blocking XREAD, so the gap check (see gapAfter) and the read see the same stream:
// no entry can be trimmed between them. When the read is caught up, a blocking XREAD
// waits for the next entry, and the loop reads it with the same check: the blocking read
// only wakes it, so an entry trimmed while it waited is still noticed.
func (c *Client) follow(ctx context.Context, queues []string, pos map[string]position, out chan<- readOut) {
	send := func(r readOut) bool {
		select {
		case out <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	read := true
	for ctx.Err() == nil {
		if read {
			r, full := c.readEventsOnce(ctx, queues, pos)
			if r.err != nil || r.gap != nil {
				send(r)
				return
			}
			if len(r.events) > 0 && !send(r) {
				return
			}
			if full {
				continue
			}
		}
		streams := make([]string, 0, 2*len(queues))
		for _, q := range queues {
			streams = append(streams, c.keys.queue(q).events)
		}
		for _, q := range queues {
			streams = append(streams, pos[q].id.String())
		}
		err := c.rdb.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: 1, Block: eventsBlock}).Err()
		// Timed out: no entry after pos exists, so none can have been trimmed either;
		// block again without reading.
		read = !errors.Is(err, redis.Nil)
		if err != nil && read {
			if ctx.Err() == nil {
				send(readOut{err: fmt.Errorf("read events of %s: %w", strings.Join(queues, ", "), err)})
			}
			return
		}
	}
}

// readEventsOnce reads up to eventsBatch entries of each stream after pos, checks that
// none was trimmed unread (see readGap), and advances pos to the last entry read. A
// position inside an entry (a cursor "ID/k") first reads the rest of that entry (XRANGE
// ID ID). full: some stream had more to read.
//
// One plain pipeline, in this order: the rests, the XREAD, then each stream's XINFO. Not
// a MULTI, which Redis 7 refuses whole while it is over maxmemory, read-only as it is: the
// XINFO after the read is enough, since a stream is trimmed from its oldest entry only
// and its first entry never moves back (see readGap).
func (c *Client) readEventsOnce(ctx context.Context, queues []string, pos map[string]position) (readOut, bool) {
	keyOf := make(map[string]string, len(queues))
	streams := make([]string, 0, 2*len(queues))
	infos := make([]*redis.XInfoStreamCmd, len(queues))
	rests := make([]*redis.XMessageSliceCmd, len(queues))
	pipe := c.rdb.Pipeline()
	for i, q := range queues {
		k := c.keys.queue(q).events
		keyOf[k] = q
		streams = append(streams, k)
		if p := pos[q]; p.read > 0 {
			rests[i] = pipe.XRange(ctx, k, p.id.String(), p.id.String())
		}
	}
	for _, q := range queues {
		streams = append(streams, pos[q].id.String())
	}
	read := pipe.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: eventsBatch, Block: -1})
	for i := range queues {
		infos[i] = pipe.XInfoStream(ctx, streams[i])
	}
	_, _ = pipe.Exec(ctx)
	res, err := read.Result()
	if errors.Is(err, redis.Nil) {
		err, res = nil, nil
	}
	if err != nil {
		return readOut{err: fmt.Errorf("read events of %s: %w", strings.Join(queues, ", "), err)}, false
	}
	full := false
	got := map[string][]redis.XMessage{}
	for _, s := range res {
		q := keyOf[s.Stream]
		full = full || len(s.Messages) >= eventsBatch
		got[q] = s.Messages
	}
	// The rest of each entry a position is inside: its events after the first p.read.
	rest := map[string][]Event{}
	restFound := map[string]bool{}
	for i, q := range queues {
		if rests[i] == nil {
			continue
		}
		msgs, err := rests[i].Result()
		if err != nil {
			return readOut{err: fmt.Errorf("read events of %s: %w", q, err)}, false
		}
		p := pos[q]
		for _, m := range msgs {
			restFound[q] = true
			for _, e := range decodeEntry(q, m) {
				if e.idx >= p.read {
					rest[q] = append(rest[q], e)
				}
			}
		}
	}
	for i, q := range queues {
		info, err := infos[i].Result()
		if err != nil {
			if isNoSuchKey(err) {
				continue // no stream yet: nothing written, nothing lost
			}
			return readOut{err: fmt.Errorf("read events of %s: %w", q, err)}, false
		}
		var next string // the first entry the XREAD gave
		if ms := got[q]; len(ms) > 0 {
			next = ms[0].ID
		}
		if first, gap := readGap(pos[q], restFound[q], next, info); gap {
			return readOut{gap: &GapError{Queue: q, First: first.String()}, gapFirst: first}, false
		}
	}
	var r readOut
	for _, q := range queues {
		if p := pos[q]; p.read > 0 {
			pos[q] = position{id: p.id, checked: true}
		}
		r.events = append(r.events, rest[q]...)
		for _, m := range got[q] {
			sid, ok := parseStreamID(m.ID)
			if !ok {
				continue
			}
			pos[q] = position{id: sid, checked: true}
			r.events = append(r.events, decodeEntry(q, m)...)
		}
	}
	return r, full
}

// readGap reports whether a read from p lost entries, given what it got: whether the
// rest of p's entry was found (p.read > 0), the first entry the XREAD returned after p
// (next, "" for none), and the stream's XINFO taken after both. It answers as gapAfter
// would on the stream as it was at the read: trimming removes the oldest entries only, so
// a first entry at or before p after the read was so at the read too (no gap); else the
// stream's first entry at the read was next, when the XREAD returned one, and p's own
// entry is gone when its rest was not found. A trim of entries after p between the read
// and the XINFO, a stream so close to losing unread events it moves on, can make this
// report a gap gapAfter would not have: a false alarm, never a silent loss.
func readGap(p position, restFound bool, next string, info *redis.XInfoStream) (streamID, bool) {
	if p.read > 0 {
		if !restFound {
			return gapAfter(p, info) // p's entry is gone: a gap if it was trimmed
		}
		p.read = 0 // the rest is read: from here on, after p's entry
	}
	if next == "" {
		// Nothing after p at the read: nothing after p could be trimmed before it (the
		// newest entry always stays).
		return streamID{}, false
	}
	at := *info
	if first, ok := parseStreamID(cmp.Or(info.FirstEntry.ID, info.RecordedFirstEntryID)); ok && first.compare(p.id) > 0 {
		at.FirstEntry.ID = next // the stream's first entry at the read
	}
	return gapAfter(p, &at)
}

// gapAfter reports whether the stream described by info lost entries a reader at p has
// not read: its oldest entry is past p, yet is not the very next ID (p itself, or what
// followed it, was trimmed), and the stream did drop entries (entries-added, Redis 7+,
// exceeds its length; an older Redis does not say, so it counts as dropped). A reader
// whose last entry alone was trimmed, the next one kept, reads as a gap too: Redis keeps
// no trace of what it dropped, so the rare false alarm is the price of never a silent loss.
//
// A position inside an entry (p.read > 0) has not read all of p.id yet: p.id itself trimmed
// is a gap too.
func gapAfter(p position, info *redis.XInfoStream) (streamID, bool) {
	if !p.checked || info.Length == 0 {
		return streamID{}, false
	}
	firstID := info.FirstEntry.ID
	if firstID == "" {
		firstID = info.RecordedFirstEntryID
	}
	first, ok := parseStreamID(firstID)
	if !ok || first.compare(p.id) <= 0 || (p.read == 0 && first == p.id.next()) {
		return streamID{}, false
	}
	if info.EntriesAdded > 0 && info.EntriesAdded <= info.Length {
		return streamID{}, false
	}
	return first, true
}

// lastEventIDs returns the ID of the latest entry ever added to each queue's stream
// (0-0 for a queue without one), in one round trip: the position of a reader that wants
// only new events.
func (c *Client) lastEventIDs(ctx context.Context, queues []string) ([]streamID, error) {
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.XInfoStreamCmd, len(queues))
	for i, q := range queues {
		cmds[i] = pipe.XInfoStream(ctx, c.keys.queue(q).events)
	}
	_, _ = pipe.Exec(ctx)
	ids := make([]streamID, len(queues))
	for i, cmd := range cmds {
		info, err := cmd.Result()
		if isNoSuchKey(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read events of %s: %w", queues[i], err)
		}
		id, ok := parseStreamID(info.LastGeneratedID)
		if !ok {
			return nil, fmt.Errorf("read events of %s: %w: last id %q", queues[i], errBadReply, info.LastGeneratedID)
		}
		ids[i] = id
	}
	return ids, nil
}

// isNoSuchKey: XINFO STREAM's reply for a stream that does not exist.
func isNoSuchKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such key")
}

// decodeEntry builds the events of a stream entry written by the scripts (the lib's event
// and write_events): one field, event, holding one line per event of the call that wrote
// it, separated by newlines; each line holds name, id, type, attempt, worker and error
// separated by tabs (the error last: it is the one value that may hold a tab). A line
// without a tab is a job's ID alone: the event of the line before it again, for that job
// (the lib's event writes repeats so). Each event knows its place in the entry, which its
// cursor carries. A line that does not parse is skipped, keeping the places of the others.
func decodeEntry(queue string, m redis.XMessage) []Event {
	sid, ok := parseStreamID(m.ID)
	if !ok {
		return nil
	}
	v, _ := m.Values["event"].(string)
	lines := strings.Split(v, "\n")
	out := make([]Event, 0, len(lines))
	at := time.UnixMilli(int64(sid.ms))
	for i, line := range lines {
		if !strings.Contains(line, "\t") {
			// A repeat of the line before, which must have been an event.
			if n := len(out); n > 0 && out[n-1].idx == i-1 && line != "" {
				e := out[n-1]
				e.ID, e.idx = line, i
				out = append(out, e)
			}
			continue
		}
		f := strings.SplitN(line, "\t", 6)
		if len(f) != 6 {
			continue
		}
		attempt, _ := strconv.Atoi(f[3])
		out = append(out, Event{Queue: queue, Name: EventName(f[0]), ID: f[1], Type: f[2], Attempt: attempt,
			Worker: f[4], Error: f[5], At: at, sid: sid, idx: i})
	}
	if len(out) > 0 {
		out[len(out)-1].last = true
	}
	return out
}

// RecentEvents returns the latest events of queues (every known queue when nil), newest
// first: the last perQueue stream entries of each queue (each entry holds one call's
// events, a batch's many), read in one pipelined round trip (XREVRANGE), without
// waiting for new ones. perQueue goes from 1 to 1000. Their Cursor is empty: follow
// [Client.Events] to resume.
func (c *Client) RecentEvents(ctx context.Context, queues []string, perQueue int) ([]Event, error) {
	if perQueue < 1 || perQueue > 1000 {
		return nil, invalid("entries per queue %d: want 1 to 1000", perQueue)
	}
	if queues == nil {
		var err error
		if queues, err = c.Queues(ctx); err != nil {
			return nil, err
		}
	}
	for _, q := range queues {
		if err := ValidateQueue(q); err != nil {
			return nil, err
		}
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(queues))
	for i, q := range queues {
		cmds[i] = pipe.XRevRangeN(ctx, c.keys.queue(q).events, "+", "-", int64(perQueue))
	}
	if len(queues) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("recent events: %w", err)
		}
	}
	var out []Event
	for i, cmd := range cmds {
		for _, m := range cmd.Val() {
			evs := decodeEntry(queues[i], m)
			for k := len(evs) - 1; k >= 0; k-- {
				out = append(out, evs[k])
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int {
		if n := b.sid.compare(a.sid); n != 0 {
			return n
		}
		return cmp.Compare(b.idx, a.idx)
	})
	return out, nil
}
