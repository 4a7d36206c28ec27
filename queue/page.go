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
)

// Page is one page of a queue's jobs in one state (see [Client.Page]).
type Page struct {
	Jobs []*Job `json:"jobs"`
	// Next is the cursor of the following page; empty on the last page.
	Next string `json:"next"`
	// Read is how many IDs the page read from the state's list or set: Jobs holds fewer
	// when some hashes expired or moved on meanwhile.
	Read int `json:"read"`
}

// MaxPage is the most jobs [Client.Page] returns at once.
const MaxPage = 1000

// Page returns up to limit (at most MaxPage) jobs of queue in state, in [Client.List]'s
// order, starting after cursor ("" for the first page). Its Redis cost does not grow with
// the queue's size:
//
//   - sorted sets (scheduled, retry, active, done, dead): the cursor is the last job's
//     score and ID; the next page starts at that ID's rank (ZRANK, O(log N)) and reads
//     limit entries (ZRANGE by rank). If that job left the set meanwhile, the page
//     starts at its score instead (ZRANGE BYSCORE LIMIT), skipping the IDs that sort
//     before it among equal scores.
//   - ready: the jobs without a limit key first, then those of each limit key (see
//     [LimitKey]) in the order the claims serve the keys, each key's in claim order. In
//     the plain list the cursor is an offset from the end claimed next. LRANGE walks
//     the list from its nearer end, so pages near either end cost O(limit), one in the
//     middle of a list of N costs up to O(N/2) node hops (Redis keeps about 100 to 1000
//     IDs per node). Among the keys the cursor names a key and an offset in its list:
//     a page reads at most limit+1 keys from there, whatever their number, in four
//     round trips. A list moves under a reader (claims take from the end counted
//     from, and move a key they served to the end of the keys), so a page may repeat
//     or miss IDs that moved.
//
// A malformed cursor wraps ErrInvalid; an unknown queue is ErrNotFound.
func (c *Client) Page(ctx context.Context, queue string, state State, cursor string, limit int) (*Page, error) {
	if err := ValidateQueue(queue); err != nil {
		return nil, err
	}
	if _, err := ParseState(string(state)); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxPage {
		return nil, invalid("page limit %d: want 1 to %d", limit, MaxPage)
	}
	known, err := c.rdb.SIsMember(ctx, c.keys.queues(), queue).Result()
	if err != nil {
		return nil, fmt.Errorf("page %s: %w", queue, err)
	}
	if !known {
		return nil, fmt.Errorf("page: queue %q: %w", queue, ErrNotFound)
	}
	var ids []string
	var next string
	if state == StateReady {
		ids, next, err = c.readyPage(ctx, queue, cursor, limit)
	} else {
		ids, next, err = c.setPage(ctx, queue, state, cursor, limit)
	}
	if err != nil {
		return nil, err
	}
	jobs, err := c.getMany(ctx, queue, ids, "")
	if err != nil {
		return nil, err
	}
	return &Page{Jobs: jobs, Next: next, Read: len(ids)}, nil
}

// readyPage pages the ready jobs: the plain list by offset (cursor "N"), then the keys'
// lists in ring order (cursor "k:...", see keyedPage). A page that reaches the plain
// list's end goes on with the keys.
func (c *Client) readyPage(ctx context.Context, queue, cursor string, limit int) ([]string, string, error) {
	qk := c.keys.queue(queue)
	if at, ok, err := parseRingCursor(cursor); ok || err != nil {
		if err != nil {
			return nil, "", err
		}
		ids, next, err := c.keyedPage(ctx, qk, &at, limit)
		if err != nil {
			return nil, "", fmt.Errorf("page %s ready: %w", queue, err)
		}
		return ids, next, nil
	}
	offset := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 || strconv.Itoa(n) != cursor {
			return nil, "", invalid("ready cursor %q: want an offset, a number >= 0, or k:OFFSET:SCORE:KEY", cursor)
		}
		offset = n
	}
	// One more than asked: whether a next page exists, without an LLEN.
	stop := int64(offset + limit)
	ids, err := c.rdb.LRange(ctx, qk.ready, -stop-1, int64(-offset-1)).Result()
	if err != nil {
		return nil, "", fmt.Errorf("page %s ready: %w", queue, err)
	}
	slices.Reverse(ids) // the right end is claimed first
	if len(ids) > limit {
		return ids[:limit], strconv.Itoa(offset + limit), nil
	}
	more, next, err := c.keyedPage(ctx, qk, nil, limit-len(ids))
	if err != nil {
		return nil, "", fmt.Errorf("page %s ready: %w", queue, err)
	}
	return append(ids, more...), next, nil
}

// setPage pages a sorted set: scheduled, retry and active by score ascending, done and
// dead descending (most recent first).
func (c *Client) setPage(ctx context.Context, queue string, state State, cursor string, limit int) ([]string, string, error) {
	qk := c.keys.queue(queue)
	key := qk.index(state)
	desc := state == StateDone || state == StateDead
	var zs []redis.Z
	var lastRead *redis.Z // set when another page may follow
	var err error
	if cursor == "" {
		zs, err = c.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: 0, Stop: int64(limit),
			Rev: desc}).Result()
	} else {
		zs, lastRead, err = c.pageAfter(ctx, key, cursor, limit, desc)
	}
	if err != nil {
		return nil, "", fmt.Errorf("page %s %s: %w", queue, state, err)
	}
	if len(zs) > limit {
		zs, lastRead = zs[:limit], &zs[limit-1]
	}
	next := ""
	if lastRead != nil {
		next = strconv.FormatFloat(lastRead.Score, 'f', -1, 64) + ":" + lastRead.Member.(string)
	}
	ids := make([]string, len(zs))
	for i, z := range zs {
		ids[i] = z.Member.(string)
	}
	return ids, next, nil
}

// pageAfter reads up to limit+1 entries of the sorted set key after the cursor
// "score:id". lastRead, when not nil, is where the next page starts though fewer than
// limit+1 came back.
func (c *Client) pageAfter(ctx context.Context, key, cursor string, limit int, desc bool) (zs []redis.Z, lastRead *redis.Z, err error) {
	ss, id, ok := strings.Cut(cursor, ":")
	score, perr := strconv.ParseFloat(ss, 64)
	if !ok || perr != nil || id == "" || math.IsNaN(score) {
		return nil, nil, invalid("cursor %q: want SCORE:ID, as the previous page's next", cursor)
	}
	zs, lastRead, _, err = c.zAfter(ctx, key, score, id, limit, desc, false)
	return zs, lastRead, err
}

// zAfter reads up to limit+1 entries of the sorted set key from member id on (incl) or
// after it, when id is still there with that score (found); else from score on, after
// the members that sort before id there. lastRead, when not nil, is where the next page
// starts though fewer than limit+1 came back.
func (c *Client) zAfter(ctx context.Context, key string, score float64, id string, limit int, desc, incl bool) (zs []redis.Z, lastRead *redis.Z, found bool, err error) {
	pipe := c.rdb.Pipeline()
	var rank *redis.IntCmd
	if desc {
		rank = pipe.ZRevRank(ctx, key, id)
	} else {
		rank = pipe.ZRank(ctx, key, id)
	}
	at := pipe.ZScore(ctx, key, id)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, false, err
	}
	if rank.Err() == nil && at.Err() == nil && at.Val() == score {
		r := rank.Val() + 1
		if incl {
			r--
		}
		zs, err = c.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: r, Stop: r + int64(limit),
			Rev: desc}).Result()
		return zs, nil, true, err
	}
	// The cursor's member left the set: start at its score, skipping the entries that
	// sort before it there (Redis orders equal scores by member, bytewise). Read a little
	// more to make up for them; a page may come out short, never stuck, as its cursor moves.
	bound := strconv.FormatFloat(score, 'f', -1, 64)
	args := redis.ZRangeArgs{Key: key, ByScore: true, Start: bound, Stop: "+inf", Count: int64(limit) + 1}
	if desc {
		args = redis.ZRangeArgs{Key: key, ByScore: true, Start: bound, Stop: "-inf", Rev: true, Count: int64(limit) + 1}
	}
	zs, err = c.rdb.ZRangeArgsWithScores(ctx, args).Result()
	if err != nil {
		return nil, nil, false, err
	}
	full := len(zs) > limit
	out := make([]redis.Z, 0, len(zs))
	for _, z := range zs {
		m := z.Member.(string)
		if z.Score == score && ((!desc && m <= id) || (desc && m >= id)) {
			continue
		}
		out = append(out, z)
	}
	if !full {
		return out, nil, false, nil
	}
	// Entries past those read may exist: the next page goes on from the last one read,
	// even when every entry read sorted before the cursor (a page never gets stuck).
	return out, &zs[len(zs)-1], false, nil
}
