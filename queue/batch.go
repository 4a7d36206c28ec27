package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/scripts"
)

// BatchJob is one job given to [Client.EnqueueBatch].
type BatchJob struct {
	Type    string
	Payload []byte
	Options []Option
}

// BatchResult is the outcome for one job of a batch. ID is the job's ID (a unique job's
// holder's when its key was held). Err is:
//   - nil: the job was enqueued;
//   - ErrDuplicate: a job with that ID already existed, or a unique job's key was held;
//     nothing was written;
//   - an error wrapping ErrUncertain: the job's script call was sent but got no reply
//     (connection lost, deadline passed), so it may or may not have been written:
//     [Client.Get] with ID tells, and enqueueing it again with [ID](ID) is safe;
//   - any other error (a Redis error reply such as OOM): the job was not written.
type BatchResult struct {
	ID  string
	Err error
}

// BatchError is the error of an [Client.EnqueueBatch] in which some jobs were not
// enqueued (Failed) or may not have been (Uncertain); every other job was enqueued or is
// a duplicate. The results hold each job's own error. errors.Is sees through it to the
// causes (ErrUncertain, context.DeadlineExceeded, ...); errors.As finds it.
type BatchError struct {
	Failed    []int // indexes of the jobs that were not written
	Uncertain []int // indexes of the jobs that may or may not have been written
	Jobs      int   // the batch's size
	causes    []error
}

// Error says how many jobs failed and how many are uncertain, and the first cause.
func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "queue: of %d jobs, %d not enqueued, %d uncertain", e.Jobs, len(e.Failed), len(e.Uncertain))
	if len(e.causes) > 0 {
		fmt.Fprintf(&b, ": %v", e.causes[0])
	}
	return b.String()
}

// Unwrap returns the distinct causes, for errors.Is and errors.As.
func (e *BatchError) Unwrap() []error { return e.causes }

// batchError returns the *BatchError of results, or nil when every job was enqueued or is
// a duplicate.
func batchError(results []BatchResult) error {
	var e *BatchError
	seen := map[string]bool{}
	for i, r := range results {
		if r.Err == nil || errors.Is(r.Err, ErrDuplicate) {
			continue
		}
		if e == nil {
			e = &BatchError{Jobs: len(results)}
		}
		if errors.Is(r.Err, ErrUncertain) {
			e.Uncertain = append(e.Uncertain, i)
		} else {
			e.Failed = append(e.Failed, i)
		}
		if msg := r.Err.Error(); !seen[msg] {
			seen[msg] = true
			e.causes = append(e.causes, r.Err)
		}
	}
	if e == nil {
		return nil
	}
	return e
}

// batchChunk is how many jobs go into one script call: large enough to amortise the call,
// small enough that one call does not stall Redis for other clients (~1 ms).
const batchChunk = 500

// EnqueueBatch adds many jobs in one round trip (one script call per queue and per 500
// jobs, pipelined) and returns one result per job, in input order.
//
// Every job is validated first: a bad job fails the whole batch, writing nothing, with
// (nil, an error naming its index). A ctx already done also writes nothing: (nil,
// ctx.Err()). Otherwise the results are always complete, and the error is nil when every
// job was enqueued or is a duplicate, or a [*BatchError] listing the jobs that were not
// enqueued or may not have been; each result says which (see [BatchResult]). Several
// queues' calls, or one queue's chunks, can fail apart: OOM on a full Redis refuses the
// calls that come after memory ran out, while the earlier ones are written.
//
// ctx's deadline bounds the call only when the Redis client has ContextTimeoutEnabled
// (go-redis otherwise waits up to its ReadTimeout); the jobs whose reply had not arrived
// are then uncertain.
func (c *Client) EnqueueBatch(ctx context.Context, jobs []BatchJob) ([]BatchResult, error) {
	now := time.Now()
	prep := make([]prepared, len(jobs))
	for i, bj := range jobs {
		p, err := c.prepare(bj, now)
		if err != nil {
			if len(jobs) > 1 {
				return nil, fmt.Errorf("job %d: %w", i, err)
			}
			return nil, err
		}
		prep[i] = p
	}
	if err := checkCycles(prep); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inCall := registerInCall(prep)
	res := c.enqueuePrepared(ctx, prep)
	c.link(ctx, prep, res, inCall)
	return res, batchError(res)
}

// enqueuePrepared enqueues jobs that passed prepare: one script call per queue and per
// batchChunk jobs, pipelined. Each job's outcome is in its result: a job whose call got no
// reply has an error wrapping ErrUncertain.
func (c *Client) enqueuePrepared(ctx context.Context, jobs []prepared) []BatchResult {
	results := make([]BatchResult, len(jobs))
	// The jobs of each queue, in input order. Most calls have one queue: no map for them.
	var order []string
	var members [][]int
	var index map[string]int
	for i := range jobs {
		q := jobs[i].o.queue
		results[i].ID = jobs[i].id
		k := -1
		if n := len(order); n > 0 && order[n-1] == q {
			k = n - 1
		} else if len(order) > 0 {
			if index == nil {
				index = make(map[string]int, 4)
				for n, name := range order {
					index[name] = n
				}
			}
			if n, ok := index[q]; ok {
				k = n
			}
		}
		if k < 0 {
			k = len(order)
			order = append(order, q)
			members = append(members, nil)
			if index != nil {
				index[q] = k
			}
		}
		members[k] = append(members[k], i)
	}

	var calls []*scriptCall
	var owners [][]int // owners[k]: the result index of each job in calls[k]
	for n, q := range order {
		qk := c.queueKeys(q)
		all := members[n]
		for start := 0; start < len(all); start += batchChunk {
			chunk := all[start:min(start+batchChunk, len(all))]
			calls = append(calls, &scriptCall{script: scripts.Enqueue,
				keys: []string{qk.ready, qk.scheduled, qk.wake, qk.events}, args: c.enqueueArgs(qk, jobs, chunk)})
			owners = append(owners, chunk)
		}
	}
	c.runScripts(ctx, c.register(order), calls)
	for k, call := range calls {
		err := readEnqueueReply(call.cmd, results, owners[k])
		if err != nil { // this call failed, or its reply was lost; the others' jobs stand
			err = outcome(ctx, "enqueue", err)
			for _, i := range owners[k] {
				results[i].Err = err
			}
		}
	}
	return results
}

// enqueueArgs is the ARGV of one enqueue.lua call for jobs[i], i in chunk: runs of jobs
// with the same settings share one group header. A call with caller-chosen IDs carries a
// nonce, stored in those jobs' hashes: if go-redis resends the call after a lost reply,
// the script recognizes its own jobs instead of reporting them as duplicates.
func (c *Client) enqueueArgs(qk queueKeys, jobs []prepared, chunk []int) []any {
	if len(chunk) == 1 {
		if p := &jobs[chunk[0]]; p.oneJobPath() {
			// The script's one-job path (most Enqueue calls): 8 arguments, not 20.
			return []any{qk.jobPrefix, "", c.eventsMax(), p.typ, orDefault(p.o.maxRetry, DefaultMaxRetry),
				orDefault(ms(p.o.timeout), DefaultTimeout.Milliseconds()), p.id, p.payload}
		}
	}
	args := make([]any, 3, 18+3*len(chunk))
	args[0], args[1], args[2] = qk.jobPrefix, "", c.eventsMax()
	for _, i := range chunk {
		if !jobs[i].fresh {
			args[1] = c.token + "." + strconv.FormatUint(c.tokens.Add(1), 36)
			break
		}
	}
	var cur group
	count, at := 0, -1 // at: the index in args of the current group's job count
	for _, i := range chunk {
		p := &jobs[i]
		if g := p.group(); at < 0 || g != cur {
			if at >= 0 {
				args[at] = count
			}
			cur, count, at = g, 0, len(args)
			args = append(args, 0, g.typ, orDefault(g.maxRetry, DefaultMaxRetry), orDefault(g.timeout, DefaultTimeout.Milliseconds()),
				g.delay, g.at, g.excl, g.uniqueTTL, flag(g.keep), flag(g.fresh), g.meta, g.after, g.batch, g.dependents, g.limitKey)
		}
		args = append(args, p.id, p.payload)
		if p.ukey != "" {
			args = append(args, p.ukey)
		}
		if p.o.limitKey != "" {
			args = append(args, p.o.limitKey)
		}
		count++
	}
	args[at] = count
	return args
}

// oneJobPath reports whether p, alone in its call, takes enqueue.lua's one-job path: due
// now, a generated ID, and no option but max_retry and timeout (its group is just those).
func (p *prepared) oneJobPath() bool {
	g := p.group()
	return g == group{typ: p.typ, maxRetry: p.o.maxRetry, timeout: ms(p.o.timeout), fresh: true}
}

// orDefault is v as an argument of enqueue.lua, or "" when it is def: the script leaves a
// field at its default out of the job's hash (KEYS.md), and readers take it as that.
func orDefault[T int | int64](v, def T) any {
	if v == def {
		return ""
	}
	return v
}

// readEnqueueReply fills in the results of the jobs of one enqueue.lua call from its reply:
// a string with one code per job, then the ID of each holder of a unique key; or, from the
// script's one-job path, the integer 1 (its one job enqueued).
func readEnqueueReply(cmd *redis.Cmd, results []BatchResult, owners []int) error {
	if n, err := cmd.Int64(); err == nil && n == 1 && len(owners) == 1 {
		return nil
	}
	reply, err := cmd.Slice()
	if err != nil {
		return err
	}
	var codes string
	if len(reply) > 0 {
		codes, _ = reply[0].(string)
	}
	if len(codes) != len(owners) {
		return fmt.Errorf("%w: %v for %d jobs", errBadReply, reply, len(owners))
	}
	holders := reply[1:]
	for n, i := range owners {
		r := &results[i]
		switch codes[n] {
		case '1':
		case '0':
			r.Err = ErrDuplicate
		case 'u':
			if len(holders) == 0 {
				return fmt.Errorf("%w: fewer holders than 'u' codes", errBadReply)
			}
			holder, _ := holders[0].(string)
			holders = holders[1:]
			r.ID, r.Err = holder, ErrDuplicate
		default:
			return fmt.Errorf("%w: code %q", errBadReply, codes[n])
		}
	}
	return nil
}
