package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jobs-dev/jobs/internal/coalesce"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/scripts"
)

// The lifecycle transitions of a claimed job, one method per script, in the order a job
// meets them (Enqueue is in client.go). They are the worker's side of the protocol, on
// broker: see broker.go.

// Promote moves the queue's due scheduled and retry jobs to ready. It returns how many it
// moved and how long until the next one is due: 0 when more are due already, negative
// when nothing is waiting.
func (c broker) Promote(ctx context.Context, queue string) (moved int, next time.Duration, err error) {
	qk := c.keys.queue(queue)
	res, err := c.run(ctx, scripts.Promote,
		[]string{qk.scheduled, qk.retry, qk.ready, qk.wake}, qk.jobPrefix, proto.PromoteLimit).Int64Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("promote %s: %w", queue, err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("promote %s: %w", queue, errBadReply)
	}
	next = time.Duration(res[1]) * time.Millisecond
	if res[1] < 0 {
		next = -1
	}
	return int(res[0]), next, nil
}

// Claim takes up to n ready jobs from the queue for worker, each under a lease of the
// given length that the worker must renew with Heartbeat. It returns nothing when the
// queue is empty or paused. The jobs carry their lease token in Job.Lease, and in
// Job.StartedAt the claim's Redis time to the microsecond: no two claims (Claim or
// AckClaim) run by one Redis server share one, so a caller with two claims of a queue in
// flight knows from it which one Redis ran first.
func (c broker) Claim(ctx context.Context, queue string, n int, lease time.Duration, worker string) ([]*Job, error) {
	if n <= 0 {
		return nil, nil
	}
	n = min(n, proto.MaxBatch)
	worker = eventSafe(worker)
	qk := c.keys.queue(queue)
	token := c.token + "." + strconv.FormatUint(c.tokens.Add(1), 36)
	res, err := c.run(ctx, scripts.Claim, []string{qk.ready, qk.active, qk.paused, qk.events, qk.limit},
		qk.jobPrefix, n, ms(lease), worker, token, c.eventsMax()).Slice()
	if err != nil {
		return nil, fmt.Errorf("claim from %s: %w", queue, err)
	}
	jobs, _, err := decodeClaimed(queue, worker, token, res)
	return jobs, err
}

// decodeClaimed decodes claim.lua's reply: {now_us, limit, job, job, ...}, each job its
// hash as a flat field/value array followed by its ID, attempt and place k in the claim.
// now_us, Redis TIME in microseconds, becomes the jobs' StartedAt; limit is
// {concurrency, why, wait_us, free} (see claim.lua).
func decodeClaimed(queue, worker, token string, res []any) ([]*Job, proto.Limited, error) {
	bad := fmt.Errorf("claim from %s: %w", queue, errBadReply)
	if len(res) < 2 {
		return nil, proto.Limited{}, bad
	}
	now, ok := res[0].(int64)
	lim, ok2 := decodeLimited(res[1])
	if !ok || !ok2 {
		return nil, proto.Limited{}, bad
	}
	started := time.UnixMicro(now)
	lim.Now = started
	if len(res) == 2 {
		return nil, lim, nil
	}
	jobs := make([]*Job, 0, len(res)-2)
	for _, r := range res[2:] {
		if entry, ok := r.(string); ok { // a job handed to the worker (ackclaim.lua)
			j, err := decodeHand(queue, worker, entry)
			if err != nil {
				return nil, proto.Limited{}, err
			}
			jobs = append(jobs, j)
			continue
		}
		flat, ok := r.([]any)
		if !ok || len(flat) < 4 {
			return nil, proto.Limited{}, bad
		}
		tail := flat[len(flat)-4:]
		id, ok1 := tail[0].(string)
		attempt, ok2 := tail[1].(int64)
		k, ok3 := tail[2].(int64)
		start, ok4 := tail[3].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, proto.Limited{}, bad
		}
		j := decodeFlat(queue, id, flat[:len(flat)-4])
		j.hint = ackHintOf(flat[:len(flat)-4])
		j.State, j.Attempt, j.StartedAt, j.Worker = StateActive, int(attempt), started, worker
		if start > now {
			// A rate's token reserved ahead: the job starts at its instant (rate_ahead in
			// scripts/lib); the worker holds it until then.
			j.StartedAt = time.UnixMicro(start)
		}
		j.Lease = token + ":" + strconv.FormatInt(k, 10)
		jobs = append(jobs, j)
	}
	return jobs, lim, nil
}

// decodeLimited decodes the limit part of a claim's reply, {concurrency, why, wait_us,
// free}.
func decodeLimited(v any) (proto.Limited, bool) {
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return proto.Limited{}, false
	}
	conc, ok1 := a[0].(int64)
	why, ok2 := a[1].(int64)
	wait, ok3 := a[2].(int64)
	free, ok4 := a[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return proto.Limited{}, false
	}
	lim := proto.Limited{Concurrency: int(conc), Free: int(free), Wait: time.Duration(wait) * time.Microsecond}
	switch why {
	case 1:
		lim.By = proto.LimitConcurrency
	case 2:
		lim.By = proto.LimitRate
	case 3:
		lim.By = proto.LimitKeys
	}
	return lim, true
}

// Heartbeat renews the leases of jobs (all from queue) for another lease length. It
// returns the lease tokens that were lost (those runs must stop, as nothing they report
// will be accepted) and the tokens of jobs an operator cancelled (those runs must stop;
// their failure goes to dead). Tokens, not IDs: one worker may briefly hold two runs of
// one job, the first of which lost its lease. Any number of jobs may be given: they go
// in script calls of at most proto.MaxBatch jobs, pipelined in one round trip. On an error
// some of those calls may have renewed their leases and others not.
func (c broker) Heartbeat(ctx context.Context, queue string, lease time.Duration, jobs []*Job) (lost, cancelled []string, err error) {
	return c.HeartbeatProgress(ctx, queue, lease, jobs, nil)
}

// HeartbeatProgress is Heartbeat that also stores, for each job whose entry in progress
// is not nil (progress is nil or as long as jobs), the progress its handler reported:
// fields progress, progress_msg (cut to proto.MaxProgressMessage bytes) and progress_at
// (Redis time) of the job's hash. Like the renewal, the progress of a job whose lease
// token is not the current one is not written: its token is reported lost.
func (c broker) HeartbeatProgress(ctx context.Context, queue string, lease time.Duration, jobs []*Job,
	progress []*proto.Progress) (lost, cancelled []string, err error) {
	if len(jobs) == 0 {
		return nil, nil, nil
	}
	if progress != nil && len(progress) != len(jobs) {
		return nil, nil, fmt.Errorf("heartbeat %s: %w: %d progress entries for %d jobs", queue, ErrInvalid, len(progress), len(jobs))
	}
	qk := c.keys.queue(queue)
	calls := make([]*scriptCall, 0, (len(jobs)+proto.MaxBatch-1)/proto.MaxBatch)
	for start := 0; start < len(jobs); start += proto.MaxBatch {
		end := min(start+proto.MaxBatch, len(jobs))
		args := make([]any, 3, 3+4*(end-start))
		args[0], args[1] = qk.jobPrefix, ms(lease)
		// The jobs with progress go first, in groups of four; the script learns how many
		// from args[2].
		p := 0
		for i := start; i < end; i++ {
			if progress != nil && progress[i] != nil {
				pr := progress[i]
				args = append(args, jobs[i].ID, jobs[i].Lease, min(max(pr.Percent, 0), 100), proto.CutProgressMessage(pr.Message))
				p++
			}
		}
		args[2] = p
		for i := start; i < end; i++ {
			if progress == nil || progress[i] == nil {
				args = append(args, jobs[i].ID, jobs[i].Lease)
			}
		}
		calls = append(calls, &scriptCall{script: scripts.Heartbeat, keys: []string{qk.active}, args: args})
	}
	c.runScripts(ctx, nil, calls)
	lost, cancelled = []string{}, []string{}
	for _, call := range calls {
		res, err := call.cmd.Slice()
		if err != nil {
			return nil, nil, fmt.Errorf("heartbeat %s: %w", queue, err)
		}
		if len(res) != 2 {
			return nil, nil, fmt.Errorf("heartbeat %s: %w", queue, errBadReply)
		}
		lost = append(lost, stringList(res[0])...)
		cancelled = append(cancelled, stringList(res[1])...)
	}
	return lost, cancelled, nil
}

// Ack marks a claimed job done and stores result. It returns ErrLeaseLost, changing
// nothing, when the caller's lease is gone, and ErrCancelled when an operator cancelled
// the job while it ran: a cancel is final, so the job goes to dead instead (last_error
// "cancelled by operator", counted as failed) and result is dropped; a resent call gets
// ErrCancelled again. An ack of a job already done under the same lease (a call resent
// after its reply was lost) returns nil and changes nothing; with Config.DoneRetention < 0
// the job is gone by then and that reads as ErrLeaseLost. Concurrent Acks share one
// script call per queue (and per proto.MaxBatch jobs).
//
// Like [Client.Enqueue], Ack returns when ctx ends: with ctx's error when nothing was
// sent, or an error wrapping [ErrUncertain] when the ack was sent but got no reply. An
// uncertain ack is safe to repeat with the same Job.
func (c broker) Ack(ctx context.Context, job *Job, result []byte) error {
	if job.Lease == "" { // a Job read by Get or List holds no lease
		return fmt.Errorf("ack %s: %w", job.ID, ErrLeaseLost)
	}
	err, waitErr := c.acks.Do(ctx, ackItem{job, result})
	if errors.Is(waitErr, coalesce.ErrInFlight) {
		return fmt.Errorf("ack %s: %w: %w", job.ID, ErrUncertain, ctx.Err())
	}
	if waitErr != nil {
		return fmt.Errorf("ack %s: %w", job.ID, waitErr)
	}
	return err
}

type ackItem struct {
	job    *Job
	result []byte
}

// ackCoalesced acknowledges a batch of jobs: one ack.lua call per queue and per proto.MaxBatch
// jobs, pipelined.
func (c *Client) ackCoalesced(ctx context.Context, items []ackItem) []error {
	retention := c.doneRetention()
	byQueue := map[string][]int{}
	var order []string
	for i, it := range items {
		if _, ok := byQueue[it.job.Queue]; !ok {
			order = append(order, it.job.Queue)
		}
		byQueue[it.job.Queue] = append(byQueue[it.job.Queue], i)
	}
	var calls []*scriptCall
	var owners [][]int // owners[k]: the index in items of each job in calls[k]
	for _, q := range order {
		qk := c.keys.queue(q)
		all := byQueue[q]
		for start := 0; start < len(all); start += proto.MaxBatch {
			chunk := all[start:min(start+proto.MaxBatch, len(all))]
			hints := make([]byte, len(chunk))
			for n, i := range chunk {
				hints[n] = items[i].job.ackHint()
			}
			args := make([]any, 0, 8+3*len(chunk))
			args = append(args, qk.jobPrefix, qk.stats, retention, c.cfg.DoneMax,
				ms(c.cfg.DeadRetention), c.cfg.DeadMax, c.eventsMax(), string(hints))
			for _, i := range chunk {
				args = append(args, items[i].job.ID, items[i].job.Lease, items[i].result)
			}
			calls = append(calls, &scriptCall{script: scripts.Ack,
				keys: []string{qk.active, qk.done, qk.dead, qk.events, qk.limit, qk.ready, qk.wake}, args: args})
			owners = append(owners, chunk)
		}
	}
	errs := make([]error, len(items))
	c.runScripts(ctx, nil, calls)
	for k, call := range calls {
		codes, err := call.cmd.Int64Slice()
		if err == nil && len(codes) != len(owners[k]) {
			err = errBadReply
		}
		if err != nil {
			err = outcome(ctx, "script", err)
		}
		for n, i := range owners[k] {
			e := err
			if e == nil {
				e = settled(codes[n])
			}
			if e != nil {
				errs[i] = fmt.Errorf("ack %s: %w", items[i].job.ID, e)
			}
		}
	}
	return errs
}

// AckClaim acknowledges finished jobs of queue, each with its result, as Ack does each, and then claims up to n
// ready jobs from it, as Claim does, in one round trip: a worker whose slots free up
// reports the jobs that freed them and refills the slots at once. acked has one entry per
// finished job: nil when it is done, ErrCancelled when an operator had cancelled it (it is
// dead now), ErrLeaseLost when its lease was gone (nothing changed for it). With a non-nil err no job is returned, and acked is nil when the call itself
// failed: the acks may or may not have been applied then (their jobs come back after
// their lease when not). Jobs claimed by a call whose reply was lost come back the same
// way. A job of another queue, or more than proto.MaxBatch finished jobs, is refused with
// ErrInvalid before anything is sent.
func (c broker) AckClaim(ctx context.Context, queue string, finished []*Job, results [][]byte, n int,
	lease time.Duration, worker string) (acked []error, claimed []*Job, err error) {
	acked, claimed, _, err = c.AckClaimLimited(ctx, queue, finished, results, n, lease, worker)
	return acked, claimed, err
}

// AckClaimLimited is AckClaim that also returns what the claim met of the queue's limits
// (Client.SetLimit): its concurrency limit, and whether a limit cut the claim short and
// until when. A worker that met a limit claims again when the slot or token is due, or a
// wake token says a slot freed.
func (c broker) AckClaimLimited(ctx context.Context, queue string, finished []*Job, results [][]byte, n int,
	lease time.Duration, worker string) (acked []error, claimed []*Job, lim proto.Limited, err error) {
	acked, claimed, lim, _, err = c.ackClaim(ctx, queue, finished, results, n, lease, worker, nil)
	return acked, claimed, lim, err
}

// ackClaim is AckClaimLimited, and AckClaimWaiting when w is not nil.
func (c broker) ackClaim(ctx context.Context, queue string, finished []*Job, results [][]byte, n int,
	lease time.Duration, worker string, w *proto.Waiter) (acked []error, claimed []*Job, lim proto.Limited, registered bool, err error) {
	n = min(max(n, 0), proto.MaxBatch)
	if len(finished) == 0 && n == 0 && w == nil {
		return nil, nil, lim, false, nil
	}
	if len(finished) > proto.MaxBatch {
		return nil, nil, lim, false, fmt.Errorf("ack and claim on %s: %w: %d finished jobs, the limit is %d",
			queue, ErrInvalid, len(finished), proto.MaxBatch)
	}
	if len(results) != len(finished) {
		return nil, nil, lim, false, fmt.Errorf("ack and claim on %s: %w: %d results for %d jobs", queue, ErrInvalid, len(results), len(finished))
	}
	for _, f := range finished {
		if f.Queue != queue {
			return nil, nil, lim, false, fmt.Errorf("ack %s: %w: job of queue %q given to AckClaim on %q",
				f.ID, ErrInvalid, f.Queue, queue)
		}
	}
	worker = eventSafe(worker)
	qk := c.keys.queue(queue)
	token := c.token + "." + strconv.FormatUint(c.tokens.Add(1), 36)
	member, waiterFor := "", int64(0)
	if w != nil {
		member, waiterFor = w.Member, ms(proto.WaiterFor)
	}
	hints := make([]byte, len(finished))
	for i, f := range finished {
		hints[i] = f.ackHint()
	}
	args := make([]any, 0, 14+3*len(finished))
	args = append(args, qk.jobPrefix, qk.stats, c.doneRetention(), c.cfg.DoneMax, n, ms(lease), worker, token,
		ms(c.cfg.DeadRetention), c.cfg.DeadMax, c.eventsMax(), member, waiterFor, string(hints))
	for i, f := range finished {
		args = append(args, f.ID, f.Lease, results[i])
	}
	res, err := c.run(ctx, scripts.AckClaim, []string{qk.active, qk.done, qk.ready, qk.paused, qk.dead, qk.events, qk.limit, qk.wake},
		args...).Slice()
	if err != nil {
		return nil, nil, lim, false, fmt.Errorf("ack and claim on %s: %w", queue, err)
	}
	if len(res) < 2 {
		return nil, nil, lim, false, fmt.Errorf("ack and claim on %s: %w", queue, errBadReply)
	}
	codes, ok := res[0].([]any)
	if !ok || len(codes) != len(finished) {
		return nil, nil, lim, false, fmt.Errorf("ack and claim on %s: %w", queue, errBadReply)
	}
	acked = make([]error, len(finished))
	for i, code := range codes {
		n, _ := code.(int64)
		if e := settled(n); e != nil {
			acked[i] = fmt.Errorf("ack %s: %w", finished[i].ID, e)
		}
	}
	claimed, lim, err = decodeClaimed(queue, worker, token, res[1:])
	if w != nil && err == nil {
		handed := 0
		for _, r := range res[3:] {
			if _, ok := r.(string); ok {
				handed++
			}
		}
		registered = n > 0 && len(claimed)-handed < n && lim.By == ""
	}
	return acked, claimed, lim, registered, err
}

// doneRetention is ack.lua's retention argument: 0 deletes done jobs at once.
func (c *Client) doneRetention() int64 {
	if c.cfg.DoneRetention < 0 {
		return 0
	}
	return ms(c.cfg.DoneRetention)
}

// Fail records a failed attempt of a claimed job with reason as its last error. The job
// goes to retry, due after retryIn, while it has attempts left (attempt <= max_retry),
// else to dead; retryIn = proto.NoRetry sends it to dead at once. It returns the state the job
// moved to, or ErrLeaseLost, changing nothing, when the caller's lease is gone. Failing
// again with the same lease (a call resent after its reply was lost) returns the same
// state and changes nothing.
func (c broker) Fail(ctx context.Context, job *Job, reason string, retryIn time.Duration) (State, error) {
	if job.Lease == "" {
		return "", fmt.Errorf("fail %s: %w", job.ID, ErrLeaseLost)
	}
	qk := c.keys.queue(job.Queue)
	retry := ms(retryIn)
	if retryIn < 0 {
		retry = -1
	}
	res, err := c.run(ctx, scripts.Fail, []string{qk.active, qk.retry, qk.dead, qk.wake, qk.events, qk.limit, qk.ready},
		qk.jobPrefix, qk.stats, ms(c.cfg.DeadRetention), c.cfg.DeadMax, c.eventsMax(),
		job.ID, job.Lease, reason, retry, shortError(reason)).StringSlice()
	if err != nil {
		return "", fmt.Errorf("fail %s: %w", job.ID, err)
	}
	if len(res) != 1 {
		return "", fmt.Errorf("fail %s: %w", job.ID, errBadReply)
	}
	if res[0] == "lost" {
		return "", fmt.Errorf("fail %s: %w", job.ID, ErrLeaseLost)
	}
	return State(res[0]), nil
}

// HandBack gives back a claimed job the worker will not run to the end, without counting
// the attempt. With after = 0 (the worker is shutting down) the job goes to the head of
// its queue's ready list, so another worker takes it at once; with after > 0 it is
// scheduled that far ahead (see also [Client.Postpone]). A job an operator cancelled goes
// to dead instead (last_error "cancelled by operator"; attempt not counted) and HandBack
// returns ErrCancelled. Handing back again with the same lease (a resent call) returns
// the same result and changes nothing.
func (c broker) HandBack(ctx context.Context, job *Job, after time.Duration) error {
	return c.handBack(ctx, "hand back", job, max(after, 0), "", "")
}

// Postpone gives back a claimed job unrun, to run after the given delay, as HandBack does
// with after > 0 (the attempt is not counted; a cancelled job goes to dead and Postpone
// returns ErrCancelled; a resent call gets the same result and changes nothing), and
// records why: the job's Postponed count goes up by one, and reason, when not empty,
// becomes its LastError. A worker postpones a job it cannot run now, such as an exclusive
// job whose lock is held elsewhere or a type it has no handler for, growing the delay
// with Postponed. after must be positive (ErrInvalid otherwise; HandBack gives back with
// no delay).
func (c broker) Postpone(ctx context.Context, job *Job, after time.Duration, reason string) error {
	if after <= 0 {
		return fmt.Errorf("postpone %s: %w: delay %s must be positive", job.ID, ErrInvalid, after)
	}
	return c.handBack(ctx, "postpone", job, after, "1", reason)
}

// PauseKey postpones a claimed job as Postpone does, and pauses its limit key (see
// [LimitKey]) for the same delay: no job of the key starts before it ends, and this one
// goes back to the head of the key's jobs, first to run when the key's pause ends. A
// job without a limit key is just postponed. For a handler whose upstream said "not now"
// for the whole key (a customer's API answering 429).
func (c broker) PauseKey(ctx context.Context, job *Job, after time.Duration, reason string) error {
	if after <= 0 {
		return fmt.Errorf("pause key of %s: %w: delay %s must be positive", job.ID, ErrInvalid, after)
	}
	return c.handBack(ctx, "pause key of", job, after, "k", reason)
}

// handBack runs handback.lua for one job: op names it in errors.
// mode is handback.lua's ARGV[5]: "" a hand back, "1" a postpone, "k" a postpone that
// pauses the job's limit key.
func (c *Client) handBack(ctx context.Context, op string, job *Job, after time.Duration, mode, reason string) error {
	if job.Lease == "" {
		return fmt.Errorf("%s %s: %w", op, job.ID, ErrLeaseLost)
	}
	qk := c.keys.queue(job.Queue)
	res, err := c.run(ctx, scripts.HandBack, []string{qk.active, qk.ready, qk.scheduled, qk.wake, qk.dead, qk.events, qk.limit},
		qk.jobPrefix, ms(after), ms(c.cfg.DeadRetention), c.cfg.DeadMax, mode, reason,
		c.eventsMax(), job.ID, job.Lease).Int64Slice()
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, job.ID, err)
	}
	if len(res) != 1 {
		return fmt.Errorf("%s %s: %w", op, job.ID, errBadReply)
	}
	if err := settled(res[0]); err != nil {
		return fmt.Errorf("%s %s: %w", op, job.ID, err)
	}
	return nil
}

// Reap finds the queue's jobs whose lease expired (their worker died or lost Redis) and
// puts each back at the head of ready (claimed next: it already waited its turn once), or
// in dead when it has no attempts left; the attempt counts. It returns how many it reaped. Every worker calls it periodically, so a dead
// worker's jobs come back within about one lease.
func (c broker) Reap(ctx context.Context, queue string) (int, error) {
	n, _, err := c.reap(ctx, queue)
	return n, err
}

// reap runs reap.lua: the jobs reaped, and whether the queue's outbox holds entries.
func (c broker) reap(ctx context.Context, queue string) (int, bool, error) {
	qk := c.keys.queue(queue)
	res, err := c.run(ctx, scripts.Reap, []string{qk.active, qk.ready, qk.dead, qk.wake, qk.events, qk.limit, qk.outbox},
		qk.jobPrefix, qk.stats, proto.ReapLimit, ms(c.cfg.DeadRetention), c.cfg.DeadMax, c.eventsMax()).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("reap %s: %w", queue, err)
	}
	if len(res) != 2 {
		return 0, false, fmt.Errorf("reap %s: %w", queue, errBadReply)
	}
	return int(res[0]), res[1] > 0, nil
}

// stringList converts a script's array reply of strings.
func stringList(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
