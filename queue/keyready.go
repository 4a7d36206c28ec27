package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/scripts"
)

// Keyed ready jobs. A job with a limit key K waits, when due, in K's list
// jobs:{q}:kready:K and K in the queue's ring jobs:{q}:keys (scripts/lib), never in
// ready. Every reader of the ready state reads both: the plain list first, then the keys
// in ring order (the order the claims serve them), each key's jobs in claim order. The
// reads are pipelines, never scripts, and each round trip reads at most ringPage keys (or
// a page's jobs), so a ring of 100,000 keys costs a hundred small calls, never one that
// holds Redis up.

// ringPage is the most keys one round trip reads from a ring (ZSCAN's COUNT, a ZRANGE of
// ranks, a pipeline of LLENs).
const ringPage = 1000

// ringPos is a place in the keyed part of the ready listing: key, scored score in the
// ring when the place was taken, off jobs into its list from the end claimed next.
type ringPos struct {
	off   int64
	score float64
	key   string
}

// ringCursorPrefix starts a ready cursor that points into the keys' lists; a plain
// cursor is an offset into ready (a number).
const ringCursorPrefix = "k:"

// String is the cursor "k:OFF:SCORE:KEY" (the key last: it may hold colons).
func (p ringPos) String() string {
	return ringCursorPrefix + strconv.FormatInt(p.off, 10) + ":" + strconv.FormatFloat(p.score, 'f', -1, 64) + ":" + p.key
}

// parseRingCursor reads a cursor made by ringPos.String; ok is false for a plain cursor.
func parseRingCursor(cursor string) (p ringPos, ok bool, err error) {
	rest, ok := strings.CutPrefix(cursor, ringCursorPrefix)
	if !ok {
		return ringPos{}, false, nil
	}
	f := strings.SplitN(rest, ":", 3)
	if len(f) == 3 {
		off, err1 := strconv.ParseInt(f[0], 10, 64)
		score, err2 := strconv.ParseFloat(f[1], 64)
		if err1 == nil && err2 == nil && off >= 0 && !math.IsNaN(score) && f[2] != "" {
			return ringPos{off: off, score: score, key: f[2]}, true, nil
		}
	}
	return ringPos{}, true, invalid("ready cursor %q: want k:OFFSET:SCORE:KEY, as the previous page's next", cursor)
}

// keyedPage reads up to limit IDs of the keys' ready jobs from at (nil: the ring's
// start), and the cursor of what follows ("" when nothing does). Four round trips
// whatever the ring's size: where at's key stands now (ZRANK, ZSCORE), up to limit+1
// keys from there, their lengths, the jobs taken from the first of them. A key served
// meanwhile has moved to the ring's end (the claims put it back behind the others): the
// page goes on after its old place, and the key's jobs come again at the end; like any
// list under workers, a page may repeat or miss jobs that moved.
func (c *Client) keyedPage(ctx context.Context, qk queueKeys, at *ringPos, limit int) ([]string, string, error) {
	var zs []redis.Z
	var lastRead *redis.Z
	var err error
	first := int64(0) // the offset in the first key's list
	if at == nil {
		zs, err = c.rdb.ZRangeWithScores(ctx, qk.ring, 0, int64(limit)).Result()
	} else {
		var found bool
		zs, lastRead, found, err = c.zAfter(ctx, qk.ring, at.score, at.key, limit, false, true)
		if found {
			first = at.off
		}
	}
	if err != nil {
		return nil, "", err
	}
	if len(zs) == 0 {
		if lastRead != nil { // every key read sorted before at's: go on after them
			return nil, ringPos{off: math.MaxInt32, score: lastRead.Score, key: lastRead.Member.(string)}.String(), nil
		}
		return nil, "", nil
	}
	lens, err := c.keyLens(ctx, qk, zMembers(zs))
	if err != nil {
		return nil, "", err
	}
	type take struct {
		key    string
		off, n int64
	}
	var takes []take
	left, next := int64(limit), ""
	for i, z := range zs {
		key, off := z.Member.(string), int64(0)
		if i == 0 {
			off = first
		}
		avail := lens[i] - off
		if avail <= 0 {
			continue // emptied since the ring was read, or read to its end
		}
		if left == 0 {
			next = ringPos{off: off, score: z.Score, key: key}.String()
			break
		}
		n := min(avail, left)
		takes = append(takes, take{key, off, n})
		left -= n
		if n < avail {
			next = ringPos{off: off + n, score: z.Score, key: key}.String()
			break
		}
	}
	if next == "" && (len(zs) > limit || lastRead != nil) {
		// Every key read was read to its end (or found empty), and more may follow: go
		// on after the last one.
		z, off := zs[len(zs)-1], lens[len(zs)-1]
		if lastRead != nil {
			z, off = *lastRead, math.MaxInt32 // past its jobs, whatever their number
		}
		next = ringPos{off: off, score: z.Score, key: z.Member.(string)}.String()
	}
	if len(takes) == 0 {
		return nil, next, nil
	}
	pipe := c.rdb.Pipeline()
	got := make([]*redis.StringSliceCmd, len(takes))
	for i, t := range takes {
		got[i] = pipe.LRange(ctx, qk.kready(t.key), -t.off-t.n, -t.off-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, "", err
	}
	var ids []string
	for _, g := range got {
		part := g.Val()
		slices.Reverse(part) // the right end is claimed first
		ids = append(ids, part...)
	}
	return ids, next, nil
}

// keyLens returns the length of each key's list, in one pipelined round trip.
func (c *Client) keyLens(ctx context.Context, qk queueKeys, keys []string) ([]int64, error) {
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.LLen(ctx, qk.kready(k))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	lens := make([]int64, len(keys))
	for i, cmd := range cmds {
		lens[i] = cmd.Val()
	}
	return lens, nil
}

func zMembers(zs []redis.Z) []string {
	out := make([]string, len(zs))
	for i, z := range zs {
		out[i] = z.Member.(string)
	}
	return out
}

// ringSkip is the place of the skip-th keyed ready job (0-based, in ring order): the
// ring read in pages of ringPage keys by rank, with their lengths, two round trips a
// page. past is true when the keys hold at most skip jobs. Ranks shift as the claims
// serve keys, so a skip over a busy ring is approximate, as any offset into a moving list.
func (c *Client) ringSkip(ctx context.Context, qk queueKeys, skip int64) (p *ringPos, past bool, err error) {
	if skip == 0 {
		return nil, false, nil
	}
	for rank := int64(0); ; rank += ringPage {
		zs, err := c.rdb.ZRangeWithScores(ctx, qk.ring, rank, rank+ringPage-1).Result()
		if err != nil || len(zs) == 0 {
			return nil, true, err
		}
		lens, err := c.keyLens(ctx, qk, zMembers(zs))
		if err != nil {
			return nil, false, err
		}
		for i, z := range zs {
			n := lens[i]
			if skip < n {
				return &ringPos{off: skip, score: z.Score, key: z.Member.(string)}, false, nil
			}
			skip -= n
		}
	}
}

// readyList is List for the ready state: limit IDs from offset in the combined order,
// the plain list then the keys', the keyed part read in pages of at most MaxPage.
func (c *Client) readyList(ctx context.Context, qk queueKeys, offset, limit int) ([]string, error) {
	pipe := c.rdb.Pipeline()
	plain := pipe.LRange(ctx, qk.ready, int64(-offset-limit), int64(-offset-1))
	n := pipe.LLen(ctx, qk.ready)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	ids := plain.Val()
	slices.Reverse(ids) // the right end is claimed first
	if len(ids) >= limit {
		return ids, nil
	}
	at, past, err := c.ringSkip(ctx, qk, max(int64(offset)-n.Val(), 0))
	if err != nil || past {
		return ids, err
	}
	for len(ids) < limit {
		more, next, err := c.keyedPage(ctx, qk, at, min(limit-len(ids), MaxPage))
		if err != nil {
			return nil, err
		}
		ids = append(ids, more...)
		if next == "" {
			break
		}
		p, _, _ := parseRingCursor(next)
		at = &p
	}
	return ids, nil
}

// keyedCounts returns, for each queue of qs, the jobs waiting in its keys' lists: the
// sum of LLEN over its ring, read with ZSCAN in pages of ringPage keys, each page's LLENs
// pipelined with the next page's ZSCAN (and all queues' pages in the same pipelines): a
// ring of N keys costs N/ringPage + 1 round trips. Exact for the keys present throughout
// (ZSCAN returns each at least once; a set of the keys seen drops repeats).
//
// firsts, when not nil, names each queue's first key in the ring ("" for none): heads
// then holds the ID its list gives the claims next, read in the first round trip.
func (c *Client) keyedCounts(ctx context.Context, qs, firsts []string) (counts []int64, heads []string, err error) {
	type scan struct {
		qk      queueKeys
		cursor  uint64
		done    bool
		seen    map[string]struct{}
		pending []string
	}
	out := make([]int64, len(qs))
	scans := make([]*scan, len(qs))
	for i, q := range qs {
		scans[i] = &scan{qk: c.keys.queue(q), seen: map[string]struct{}{}}
	}
	heads = make([]string, len(qs))
	var headCmds []*redis.StringCmd
	for round := 0; ; round++ {
		pipe := c.rdb.Pipeline()
		if round == 0 && firsts != nil {
			headCmds = make([]*redis.StringCmd, len(qs))
			for i, k := range firsts {
				if k != "" {
					headCmds[i] = pipe.LIndex(ctx, scans[i].qk.kready(k), -1) // the right end is claimed next
				}
			}
		}
		zs := make([]*redis.ScanCmd, len(qs))
		lens := make([][]*redis.IntCmd, len(qs))
		for i, s := range scans {
			if !s.done {
				zs[i] = pipe.ZScan(ctx, s.qk.ring, s.cursor, "", ringPage)
			}
			for _, k := range s.pending {
				lens[i] = append(lens[i], pipe.LLen(ctx, s.qk.kready(k)))
			}
			s.pending = nil
		}
		if pipe.Len() == 0 {
			return out, heads, nil
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, fmt.Errorf("count keyed ready jobs: %w", err)
		}
		for i, h := range headCmds {
			if h != nil {
				heads[i] = h.Val()
			}
		}
		headCmds = nil
		for i, s := range scans {
			for _, l := range lens[i] {
				out[i] += l.Val()
			}
			if zs[i] == nil {
				continue
			}
			members, cursor := zs[i].Val() // member, score, member, score...
			s.cursor, s.done = cursor, cursor == 0
			for j := 0; j < len(members); j += 2 {
				if _, ok := s.seen[members[j]]; !ok {
					s.seen[members[j]] = struct{}{}
					s.pending = append(s.pending, members[j])
				}
			}
		}
	}
}

// purgeKeyed deletes the keyed ready jobs of a queue (Purge's second half): the ring read
// with ZSCAN, ringPage keys at a time; each key's jobs there when the purge reaches it
// (LLEN, pipelined), in purge.lua calls of at most 1000 jobs (a key with more is split
// over calls). The script takes a key out of the ring when its list empties, as the claims
// do, so the ring never names a key without jobs.
func (c *Client) purgeKeyed(ctx context.Context, qk queueKeys) (int, error) {
	total := 0
	seen := map[string]struct{}{}
	for cursor, started := uint64(0), false; !started || cursor != 0; started = true {
		members, next, err := c.rdb.ZScan(ctx, qk.ring, cursor, "", ringPage).Result()
		if err != nil {
			return total, err
		}
		cursor = next
		var keys []string
		for j := 0; j < len(members); j += 2 {
			if _, ok := seen[members[j]]; !ok {
				seen[members[j]] = struct{}{}
				keys = append(keys, members[j])
			}
		}
		if len(keys) == 0 {
			continue
		}
		lens, err := c.keyLens(ctx, qk, keys)
		if err != nil {
			return total, err
		}
		var batch []any // key, count, key, count...
		jobs := int64(0)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			n, err := c.purgeCall(ctx, qk, StateReady, 0, "+inf", batch...)
			total += n
			batch, jobs = batch[:0], 0
			return err
		}
		for i, k := range keys {
			for left := lens[i]; left > 0; {
				n := min(left, 1000-jobs)
				batch = append(batch, k, n)
				jobs += n
				left -= n
				if jobs == 1000 {
					if err := flush(); err != nil {
						return total, err
					}
				}
			}
		}
		if err := flush(); err != nil {
			return total, err
		}
	}
	return total, nil
}

// purgeCall runs purge.lua once: up to limit jobs of state from its index, then, for
// ready, the keyed lists given as key, count pairs. It returns how many it deleted.
func (c *Client) purgeCall(ctx context.Context, qk queueKeys, state State, limit int64, maxScore string, keyed ...any) (int, error) {
	args := append([]any{qk.jobPrefix, limit, string(state), maxScore, c.eventsMax(), ms(c.cfg.DeadRetention),
		c.cfg.DeadMax}, keyed...)
	var n int
	err := sent(ctx, "purge", func() (err error) {
		n, err = c.run(ctx, scripts.Purge, []string{qk.index(state), qk.events, qk.ring}, args...).Int()
		return err
	})
	return n, err
}
