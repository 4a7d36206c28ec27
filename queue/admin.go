package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/scripts"
)

// The operator's side: counts, repair and flow control. Every change a repair makes to a
// job is a script, so it can never race the worker running the job.

// QueueStats are the counts of one queue. JSON field names are the `jobs stats --json`
// contract.
type QueueStats struct {
	Name string `json:"name"`
	// Ready counts every ready job: those without a limit key (in ready) and those of
	// every limit key (in its key's list, see [LimitKey]).
	Ready     int64 `json:"ready"`
	Scheduled int64 `json:"scheduled"`
	Active    int64 `json:"active"`
	Retry     int64 `json:"retry"`
	Dead      int64 `json:"dead"`
	Done      int64 `json:"done"` // retained done jobs (DoneRetention, DoneMax)
	// Waiting counts the jobs waiting for their dependencies (After, AfterJob).
	Waiting int64 `json:"waiting"`
	Paused  bool  `json:"paused"`
	// ProcessedToday counts attempts that ended today (UTC, by Redis's clock): done or
	// failed. FailedToday counts failed attempts (errors, panics, timeouts, expired
	// leases), retried or not.
	ProcessedToday int64 `json:"processed_today"`
	FailedToday    int64 `json:"failed_today"`
	// Workers counts the live workers claiming from the queue (see [Client.Processes]):
	// quiet and stopping ones are not counted.
	Workers int `json:"workers"`
	// Latency is the age of the queue's oldest ready job among the next to be claimed
	// (ready's next, and the next of the limit key the claims serve first): Redis's
	// time now less the time it became due (its run_at, else its enqueue time). Zero when
	// nothing is ready. A growing latency with jobs ready means too few workers. JSON:
	// latency_ms.
	Latency time.Duration `json:"-"`
	// WaitingOn says which of the queue's limits ([Client.SetLimit]) holds its ready jobs
	// back now: ConcurrencyLimit or RateLimit, "" when none does (or none is ready), and
	// WaitingUntil when the next job may start at the latest. JSON: waiting_on, and
	// waiting_until (RFC 3339) when not zero.
	WaitingOn    LimitKind `json:"waiting_on"`
	WaitingUntil time.Time `json:"-"`
	// KeysWaiting counts the limit keys with jobs ready (see [LimitKey]), whose jobs
	// Ready counts with the others. When no job without a key is ready and every
	// such key waits on its own limits, WaitingOn is KeyWait, until the first is due.
	KeysWaiting int `json:"keys_waiting"`
}

// MarshalJSON writes s with Latency as latency_ms, an integer of milliseconds, and
// WaitingUntil as waiting_until when not zero.
func (s QueueStats) MarshalJSON() ([]byte, error) {
	type plain QueueStats
	var until *time.Time
	if !s.WaitingUntil.IsZero() {
		t := ceilMs(s.WaitingUntil).UTC()
		until = &t
	}
	return json.Marshal(struct {
		plain
		LatencyMS    int64      `json:"latency_ms"`
		WaitingUntil *time.Time `json:"waiting_until,omitempty"`
	}{plain(s), s.Latency.Milliseconds(), until})
}

// Stats returns the counts of every known queue, sorted by name, with its live workers,
// latency and the limit it waits on, in six round trips (the Redis clock for "today"; one
// pipeline of counts and the head of each ready list; the registry, two; the heads' due
// times; the limits), and, for queues with keyed jobs ready, the sum of their keys' lists
// (see keyedCounts: two round trips up to 1,000 keys, one more per 1,000 keys).
func (c *Client) Stats(ctx context.Context) ([]QueueStats, error) {
	qs, err := c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	return c.StatsOf(ctx, qs...)
}

// StatsOf returns the counts of the given queues, in their order, as [Client.Stats] does
// for all: its cost grows with the number of queues asked for, not with how many exist.
func (c *Client) StatsOf(ctx context.Context, qs ...string) ([]QueueStats, error) {
	for _, q := range qs {
		if err := ValidateQueue(q); err != nil {
			return nil, err
		}
	}
	now, err := c.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	day := now.UTC().Format(time.DateOnly)
	type counts struct {
		ready, scheduled, active, retry, dead, done, paused, waiting *redis.IntCmd
		processed, failed, head                                      *redis.StringCmd
		firstKey                                                     *redis.StringSliceCmd
	}
	pipe := c.rdb.Pipeline()
	cs := make([]counts, len(qs))
	for i, q := range qs {
		k := c.keys.queue(q)
		cs[i] = counts{
			ready: pipe.LLen(ctx, k.ready), scheduled: pipe.ZCard(ctx, k.scheduled),
			active: pipe.ZCard(ctx, k.active), retry: pipe.ZCard(ctx, k.retry),
			dead: pipe.ZCard(ctx, k.dead), done: pipe.ZCard(ctx, k.done),
			paused: pipe.Exists(ctx, k.paused), waiting: pipe.ZCard(ctx, k.waiting),
			processed: pipe.Get(ctx, k.stats+"processed:"+day), failed: pipe.Get(ctx, k.stats+"failed:"+day),
			head:     pipe.LIndex(ctx, k.ready, -1),  // the right end is claimed next
			firstKey: pipe.ZRange(ctx, k.ring, 0, 0), // the limit key the claims serve next
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("stats: %w", err)
	}
	ps, _, err := c.processes(ctx)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	workers := workersPerQueue(ps)
	// Keyed ready jobs: the sum of their keys' lists, and the next of the first key due.
	var keyed []string
	var keyedAt []int
	var firsts []string
	for i, x := range cs {
		if k := x.firstKey.Val(); len(k) > 0 {
			keyed, keyedAt, firsts = append(keyed, qs[i]), append(keyedAt, i), append(firsts, k[0])
		}
	}
	keyedReady, keyedHeads := make([]int64, len(qs)), make([]string, len(qs))
	if len(keyed) > 0 {
		n, h, err := c.keyedCounts(ctx, keyed, firsts)
		if err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
		for j, i := range keyedAt {
			keyedReady[i], keyedHeads[i] = n[j], h[j]
		}
	}
	heads := make([][]string, len(qs))
	for i, x := range cs {
		heads[i] = []string{x.head.Val(), keyedHeads[i]}
	}
	latency, err := c.latencies(ctx, qs, heads, now)
	if err != nil {
		return nil, err
	}
	limits, err := c.Limits(ctx, qs...)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	out := make([]QueueStats, len(qs))
	for i, q := range qs {
		x := cs[i]
		p, _ := x.processed.Int64()
		f, _ := x.failed.Int64()
		out[i] = QueueStats{Name: q, Ready: x.ready.Val() + keyedReady[i], Scheduled: x.scheduled.Val(),
			Active: x.active.Val(), Retry: x.retry.Val(), Dead: x.dead.Val(), Done: x.done.Val(), Waiting: x.waiting.Val(),
			Paused: x.paused.Val() == 1, ProcessedToday: p, FailedToday: f,
			Workers: workers[q], Latency: latency[i]}
		out[i].KeysWaiting = limits[i].KeysWaiting
		if (out[i].Ready > 0 || out[i].KeysWaiting > 0) && !out[i].Paused {
			out[i].WaitingOn, out[i].WaitingUntil = limits[i].Waiting(), limits[i].Until()
			if out[i].WaitingOn == "" && x.ready.Val() == 0 {
				if u := limits[i].KeysHeldUntil(); !u.IsZero() {
					out[i].WaitingOn, out[i].WaitingUntil = KeyWait, u
				}
			}
		}
	}
	return out, nil
}

// latencies returns, for each queue of qs, the age at now of the oldest of its ready
// jobs heads[i] (the next to be claimed: ready's, the first limit key's; "" for none),
// in one pipelined round trip.
func (c *Client) latencies(ctx context.Context, qs []string, heads [][]string, now time.Time) ([]time.Duration, error) {
	out := make([]time.Duration, len(qs))
	pipe := c.rdb.Pipeline()
	cmds := make([][]*redis.SliceCmd, len(qs))
	ids := make([][]string, len(qs)) // ids[i][k]: the job cmds[i][k] reads
	for i, q := range qs {
		for _, id := range heads[i] {
			if id != "" {
				// type: present in every job's hash, so a head whose hash is gone is told
				// apart from one whose created_at is its ID's time.
				cmds[i] = append(cmds[i], pipe.HMGet(ctx, c.keys.queue(q).job(id), "created_at", "run_at", "type"))
				ids[i] = append(ids[i], id)
			}
		}
	}
	if pipe.Len() == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("stats: %w", err)
	}
	for i, cs := range cmds {
		for k, cmd := range cs {
			if len(cmd.Val()) != 3 || cmd.Val()[2] == nil {
				continue
			}
			created, _ := cmd.Val()[0].(string)
			runAt, _ := cmd.Val()[1].(string)
			if since := readySince(ids[i][k], created, runAt); !since.IsZero() {
				out[i] = max(out[i], now.Sub(since))
			}
		}
	}
	return out, nil
}

// ErrState: the job is in a state the operation does not apply to (retrying an active
// job, cancelling a done one); the message names the state.
var ErrState = errors.New("queue: job is in the wrong state")

// Retry makes a dead, retry or scheduled job ready now. A dead job gets a fresh attempt
// budget. A workflow job never runs before its dependencies succeeded, also when
// retried: a dead job that died waiting for them (cancelled, or a dependency died) goes
// back to waiting for every one not done, a dead one too (retry that one as well: the job
// runs once it is done, and dies again if it dies again); under IgnoreDependencyFailure a
// dead one is not waited for. A dependency whose record is gone (purged, deleted, or its
// done record expired) counts as dead, as at enqueue: the job dies again at once, and
// Retry returns nil (Get shows it). A dead job that had started goes to ready: its
// dependencies had succeeded. A dead dependency that a retried job waits on is kept past
// its DeadRetention until it is retried, purged, deleted or trimmed from the dead set,
// each of which resolves the job. Linking the dependencies takes two more round trips;
// when they fail, the error wraps ErrUncertain: the job waits, and cancelling and
// retrying it again completes it. A dead unique job takes its unique key back for its
// unique TTL; when another job holds the key now (its release let that one in), Retry
// refuses with an error wrapping ErrDuplicate that names the holder, and the job stays
// dead. Active, ready, waiting and done jobs are refused with ErrState; an unknown ID is
// ErrNotFound.
func (c *Client) Retry(ctx context.Context, queue, id string) error {
	res, err := c.retry(ctx, queue, "", []string{id})
	if res == nil {
		return err
	}
	return cmp.Or(err, stateResult("retry", id, res[0]))
}

// RetryAllDead makes every dead job of queue ready now (or waiting, as Retry does: a dead
// chain runs step by step again, in order), in batches of 1000, and returns how many it
// moved. It retries the jobs dead when it starts: a job that dies again meanwhile (a
// poison job, with workers running) enters the dead set with a later score and is left
// there, so the call always ends. Unique jobs whose key another job holds now are left
// dead, and the error (wrapping ErrDuplicate) says how many, naming the first. When the
// links of a batch's dependents fail, it stops with the count so far and an error
// wrapping ErrUncertain naming the first such job (see Retry).
func (c *Client) RetryAllDead(ctx context.Context, queue string) (int, error) {
	if err := ValidateQueue(queue); err != nil {
		return 0, err
	}
	qk := c.keys.queue(queue)
	maxScore, left, err := c.snapshot(ctx, qk.dead)
	if err != nil {
		return 0, fmt.Errorf("retry dead of %s: %w", queue, err)
	}
	total := 0
	var kept int64      // refused unique jobs: still dead
	var skip int64      // entries read and left in the set (kept, stale): the next read's offset
	var firstKept error // the first of them, for the error
	for left > 0 {
		ids, err := c.rdb.ZRangeByScore(ctx, qk.dead, &redis.ZRangeBy{Min: "-inf", Max: maxScore,
			Offset: skip, Count: min(left, 1000)}).Result()
		if err != nil {
			return total, fmt.Errorf("retry dead of %s: %w", queue, err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		left -= int64(len(ids))
		res, err := c.retry(ctx, queue, StateDead, ids)
		if res == nil {
			return total, err
		}
		moved := 0
		var stale []any
		for i, r := range res {
			switch {
			case r == "ready" || r == "waiting":
				moved++
			case strings.HasPrefix(r, "unique:"):
				kept++
				skip++
				if firstKept == nil {
					firstKept = stateResult("retry", ids[i], r)
				}
			default:
				stale = append(stale, ids[i])
			}
		}
		total += moved
		if err != nil { // moved, not all linked
			return total, err
		}
		if moved == 0 && len(stale) > 0 { // only stale entries left (their hashes expired): drop them
			c.rdb.ZRem(ctx, qk.dead, stale...)
		} else {
			skip += int64(len(stale))
		}
	}
	if kept > 0 {
		return total, fmt.Errorf("retry dead of %s: %d left dead, their unique key held by another job; the first: %w",
			queue, kept, firstKept)
	}
	return total, nil
}

// snapshot returns the highest score in the sorted set key and its size: the bound of a
// bulk operation on the members present when it starts, taken from Redis (not the
// client's clock). An empty set gives 0 members.
func (c *Client) snapshot(ctx context.Context, key string) (maxScore string, n int64, err error) {
	pipe := c.rdb.Pipeline()
	last := pipe.ZRangeWithScores(ctx, key, -1, -1)
	card := pipe.ZCard(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		return "", 0, err
	}
	if len(last.Val()) == 0 {
		return "", 0, nil
	}
	return strconv.FormatFloat(last.Val()[0].Score, 'f', -1, 64), card.Val(), nil
}

// retry runs retry.lua on ids and links the dependencies of the jobs it put back to
// waiting (relink). res is nil when the script's outcome is unknown; with res, err is
// relink's: the jobs moved, some not fully linked.
func (c *Client) retry(ctx context.Context, queue string, from State, ids []string) ([]string, error) {
	if err := ValidateQueue(queue); err != nil {
		return nil, err
	}
	qk := c.keys.queue(queue)
	args := append([]any{qk.jobPrefix, string(from), c.eventsMax()}, toAny(ids)...)
	var res []string
	err := sent(ctx, "retry in "+queue, func() (err error) {
		res, err = c.run(ctx, scripts.Retry, []string{qk.scheduled, qk.retry, qk.dead, qk.ready, qk.wake, qk.events, qk.waiting},
			args...).StringSlice()
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(res) != len(ids) {
		return nil, fmt.Errorf("retry in %s: %w", queue, errBadReply)
	}
	return res, c.relink(ctx, queue, ids, res)
}

// Cancel stops a job: a scheduled, ready or retry job goes to dead at once ("cancelled
// by operator"); an active job is flagged and a notice goes out to [Client.WatchCancels],
// so a worker that watches stops the handler at once; the flag also reaches the worker at
// its next heartbeat (within a third of the lease). The job then ends dead however the
// attempt ends (an ack or hand back of it returns ErrCancelled and sends it to dead). It
// returns the resulting state (StateDead, or StateActive while cancelling). Done and dead
// jobs are refused with ErrState; an unknown ID is ErrNotFound.
func (c *Client) Cancel(ctx context.Context, queue, id string) (State, error) {
	if err := ValidateQueue(queue); err != nil {
		return "", err
	}
	qk := c.keys.queue(queue)
	var res string
	err := sent(ctx, "cancel "+id, func() (err error) {
		res, err = c.run(ctx, scripts.Cancel, []string{qk.scheduled, qk.retry, qk.ready, qk.dead, qk.events},
			qk.jobPrefix, ms(c.cfg.DeadRetention), c.cfg.DeadMax, id, c.keys.cancelChannel(), queue, c.eventsMax()).Text()
		return err
	})
	if err != nil {
		return "", err
	}
	switch res {
	case "dead":
		c.deliverNow(ctx, queue)
		return StateDead, nil
	case "cancelling":
		return StateActive, nil
	}
	return "", stateResult("cancel", id, res)
}

// stateResult maps a script's "missing" / "not:<state>" answer to an error.
func stateResult(op, id, res string) error {
	switch {
	case res == "ready" || res == "dead" || res == "waiting":
		return nil
	case strings.HasPrefix(res, "unique:"):
		return fmt.Errorf("%s %s: %w: its unique key is held by job %s now", op, id, ErrDuplicate, res[len("unique:"):])
	case res == "missing":
		return fmt.Errorf("%s %s: %w", op, id, ErrNotFound)
	case len(res) > 4 && res[:4] == "not:":
		return fmt.Errorf("%s %s: %w: it is %s", op, id, ErrState, res[4:])
	}
	return fmt.Errorf("%s %s: %w: %q", op, id, errBadReply, res)
}

// Pause stops workers from claiming the queue's jobs; enqueues go on being accepted.
// Pausing a paused queue changes nothing.
func (c *Client) Pause(ctx context.Context, queue string) error {
	return c.pause(ctx, "pause", queue, true)
}

// Resume lets workers claim the queue's jobs again, waking idle ones at once. Resuming a
// queue that is not paused changes nothing.
func (c *Client) Resume(ctx context.Context, queue string) error {
	return c.pause(ctx, "resume", queue, false)
}

// pause runs pause.lua: the flag and its event (paused, resumed) change in one step.
func (c *Client) pause(ctx context.Context, op, queue string, on bool) error {
	if err := ValidateQueue(queue); err != nil {
		return err
	}
	qk := c.keys.queue(queue)
	return sent(ctx, op+" "+queue, func() error {
		return c.run(ctx, scripts.Pause, []string{qk.paused, qk.wake, qk.events}, flag(on), c.eventsMax()).Err()
	})
}

// Purge deletes every job of queue in state (not active: cancel those), in batches of
// 1000 so Redis never blocks long, and returns how many it deleted. It deletes the jobs in
// that state when it starts, not those that enter it meanwhile, so it always ends. Ready
// includes the jobs of every limit key: each key's jobs there when the purge reaches it,
// the key leaving the ring of keys when its list empties.
func (c *Client) Purge(ctx context.Context, queue string, state State) (int, error) {
	if err := ValidateQueue(queue); err != nil {
		return 0, err
	}
	qk := c.keys.queue(queue)
	index := map[State]string{StateReady: qk.ready, StateScheduled: qk.scheduled,
		StateRetry: qk.retry, StateDone: qk.done, StateDead: qk.dead, StateWaiting: qk.waiting}[state]
	if index == "" {
		return 0, invalid("purge state %q: want waiting, ready, scheduled, retry, done or dead (cancel active jobs instead)", state)
	}
	// Bound the purge by the jobs there when it starts: with workers running, jobs keep
	// entering the state (dying, retrying, becoming ready), and a purge that chased them
	// could run forever. A sorted set is bounded by its highest score and its size; the
	// ready list by its length (jobs enter it at the left, the purge takes from the right).
	maxScore, left := "+inf", int64(0)
	var err error
	if state == StateReady {
		left, err = c.rdb.LLen(ctx, index).Result()
	} else {
		maxScore, left, err = c.snapshot(ctx, index)
	}
	if err != nil {
		return 0, fmt.Errorf("purge %s %s: %w", queue, state, err)
	}
	total := 0
	for left > 0 {
		n, err := c.purgeCall(ctx, qk, state, min(left, 1000), maxScore)
		if err != nil {
			return total, fmt.Errorf("purge %s %s: %w", queue, state, err)
		}
		total += n
		left -= int64(n)
		if n == 0 {
			break
		}
	}
	if state == StateReady {
		n, err := c.purgeKeyed(ctx, qk)
		total += n
		if err != nil {
			return total, fmt.Errorf("purge %s ready (limit keys): %w", queue, err)
		}
	}
	if total > 0 {
		c.deliverNow(ctx, queue)
	}
	return total, nil
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Depths returns the number of jobs in each waiting or running state of the given queues
// (all known queues when nil) in one pipelined round trip (two when discovering queues),
// and for queues with keyed jobs ready the sum of their keys' lists (see keyedCounts):
// queue -> state -> count. Done jobs are not counted (see Stats).
func (c *Client) Depths(ctx context.Context, queues []string) (map[string]map[State]int64, error) {
	if queues == nil {
		var err error
		if queues, err = c.Queues(ctx); err != nil {
			return nil, err
		}
	}
	// One read-only script per queue (depths.lua), pipelined: each queue's counts are one
	// snapshot, and unlike a MULTI it runs on a Redis over maxmemory. The keys' lists are
	// counted after it, outside the snapshot.
	calls := make([]*scriptCall, len(queues))
	for i, q := range queues {
		k := c.keys.queue(q)
		calls[i] = &scriptCall{script: scripts.Depths, keys: []string{k.ready, k.scheduled, k.active, k.retry, k.dead, k.waiting, k.ring}}
	}
	if len(calls) > 0 {
		c.runScripts(ctx, nil, calls)
	}
	type counts struct{ ready, scheduled, active, retry, dead, waiting, keys int64 }
	cs := make([]counts, len(queues))
	for i, call := range calls {
		v, err := call.cmd.Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("depths of %s: %w", queues[i], err)
		}
		if len(v) != 7 {
			return nil, fmt.Errorf("depths of %s: %w", queues[i], errBadReply)
		}
		cs[i] = counts{v[0], v[1], v[2], v[3], v[4], v[5], v[6]}
	}
	var keyed []string
	for i, q := range queues {
		if cs[i].keys > 0 {
			keyed = append(keyed, q)
		}
	}
	keyedReady := map[string]int64{}
	if len(keyed) > 0 {
		n, _, err := c.keyedCounts(ctx, keyed, nil)
		if err != nil {
			return nil, fmt.Errorf("depths: %w", err)
		}
		for i, q := range keyed {
			keyedReady[q] = n[i]
		}
	}
	out := make(map[string]map[State]int64, len(queues))
	for i, q := range queues {
		x := cs[i]
		out[q] = map[State]int64{StateReady: x.ready + keyedReady[q], StateScheduled: x.scheduled,
			StateActive: x.active, StateRetry: x.retry, StateDead: x.dead, StateWaiting: x.waiting}
	}
	return out, nil
}

// Delete removes one job outright: its hash, its place in its state's list or set and
// its unique key (a `deleted` event). Active jobs are refused with ErrState (cancel
// them); an unknown ID is ErrNotFound.
func (c *Client) Delete(ctx context.Context, queue, id string) error {
	if err := ValidateQueue(queue); err != nil {
		return err
	}
	qk := c.keys.queue(queue)
	var res string
	err := sent(ctx, "delete "+id, func() (err error) {
		res, err = c.run(ctx, scripts.Delete, []string{qk.scheduled, qk.retry, qk.ready, qk.dead, qk.done, qk.events},
			qk.jobPrefix, id, c.eventsMax(), ms(c.cfg.DeadRetention), c.cfg.DeadMax).Text()
		return err
	})
	if err != nil {
		return err
	}
	if res == "deleted" {
		c.deliverNow(ctx, queue)
		return nil
	}
	return stateResult("delete", id, res)
}

// deliverNow delivers queue's outbox after an operator's call ended jobs there (Cancel,
// Delete, Purge): what waits on them in other queues (dependents, batches) must not wait
// for a worker of queue, which may never come. Best effort: an entry it could not deliver
// stays for the queue's workers, as the outbox's entries always do (outbox.go).
func (c *Client) deliverNow(ctx context.Context, queue string) {
	_, _ = c.broker().Deliver(ctx, queue)
}
