package queue

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/scripts"
)

// Workflows: jobs that wait for other jobs (After, AfterJob), chains (Chain) and batches
// (batches.go). A job with dependencies is enqueued in state waiting with its
// dependencies as members of a SET (jobs:{q}:deps:<id>, "queue\tid" each); every script
// that ends a job (ack, fail, reap, cancel, purge, delete, and an ack or hand back of a
// cancelled job) resolves what waits on it in the same step, or, for a dependent in
// another queue's slot, leaves an entry in its queue's outbox that workers deliver (see
// outbox.go). DESIGN.md, "Workflows", has the whole protocol.

// JobRef names a job: its queue and ID. Written "queue/id".
type JobRef struct {
	Queue string
	ID    string
}

// String is "queue/id".
func (r JobRef) String() string { return r.Queue + "/" + r.ID }

func (r JobRef) validate() error {
	if err := ValidateQueue(r.Queue); err != nil {
		return fmt.Errorf("dependency %s: %w", r, err)
	}
	if r.ID == "" {
		return invalid("dependency in queue %q: empty job ID", r.Queue)
	}
	if err := validateID(r.ID); err != nil {
		return fmt.Errorf("dependency: %w", err)
	}
	return nil
}

// member is the ref as the scripts keep it in sets: "queue\tid".
func (r JobRef) member() string { return r.Queue + "\t" + r.ID }

// parseMember reads a ref written by member; ok is false for anything else.
func parseMember(m string) (r JobRef, ok bool) {
	r.Queue, r.ID, ok = strings.Cut(m, "\t")
	return r, ok
}

// ParseJobRef reads "queue/id", or "id" alone (a job of queue def). A queue name has no
// '/', so the first one ends it; an ID may hold more.
func ParseJobRef(s, def string) (JobRef, error) {
	r := JobRef{Queue: def, ID: s}
	if q, id, ok := strings.Cut(s, "/"); ok && ValidateQueue(q) == nil {
		r = JobRef{Queue: q, ID: id}
	}
	if r.Queue == "" {
		return r, invalid("job %q: no queue given", s)
	}
	return r, r.validate()
}

// After makes the job wait, in state waiting, until the jobs with these IDs in its own
// queue have ended (done or dead); see AfterJob for a job of another queue. When every
// dependency is done the job becomes ready. When one dies (fails for good, is cancelled,
// purged or deleted, or is unknown), the job goes to dead with "dependency Q/ID died",
// unless IgnoreDependencyFailure. Not with Delay or At. A job that waits on itself, or
// jobs of one EnqueueBatch that wait on each other in a cycle, are refused (ErrInvalid
// naming the cycle); a cycle closed by calls that race ends dead (DESIGN.md, "Workflows").
func After(ids ...string) Option {
	return func(o *options) {
		for _, id := range ids {
			o.after = append(o.after, JobRef{ID: id})
		}
	}
}

// AfterJob is After for a job of any queue. Dependencies in other queues may live on
// other Redis Cluster nodes: their end reaches the dependent through the outbox a worker
// of their queue delivers, within a few milliseconds when a worker is idle, at the latest
// within about a second.
func AfterJob(queue, id string) Option {
	return func(o *options) { o.after = append(o.after, JobRef{Queue: queue, ID: id}) }
}

// IgnoreDependencyFailure makes a job with dependencies run once they have all ended,
// whether they succeeded or died (the default sends it to dead when one dies).
func IgnoreDependencyFailure() Option { return func(o *options) { o.depRun = true } }

// afterArg is enqueue.lua's after argument: policy\tqueue\tid\tqueue\tid...; "" = none.
func (o *options) afterArg() string {
	if len(o.after) == 0 {
		return ""
	}
	var b strings.Builder
	if o.depRun {
		b.WriteString("run")
	} else {
		b.WriteString("die")
	}
	seen := make(map[JobRef]bool, len(o.after))
	for _, r := range o.after {
		if seen[r] {
			continue
		}
		seen[r] = true
		b.WriteString("\t" + r.member())
	}
	return b.String()
}

// Chain makes each job wait for the one before it (AfterJob): b runs when a is done, c
// when b is. A job given no ID gets one here, so the chain can name it. Enqueue the
// result with [Client.EnqueueBatch]: its results are in the chain's order.
func Chain(jobs ...BatchJob) []BatchJob {
	out := make([]BatchJob, len(jobs))
	var prev JobRef
	for i, j := range jobs {
		o, _ := resolve(j.Options) // a bad option fails EnqueueBatch with its index
		opts := append([]Option(nil), j.Options...)
		if o.id == "" {
			o.id = newID()
			opts = append(opts, ID(o.id))
		}
		if i > 0 {
			opts = append(opts, AfterJob(prev.Queue, prev.ID))
		}
		prev = JobRef{Queue: o.queue, ID: o.id}
		out[i] = BatchJob{Type: j.Type, Payload: j.Payload, Options: opts}
	}
	return out
}

// newID is a fresh job ID in the layout of generated ones (time, then 80 random bits),
// for a workflow that must name its jobs before it enqueues them.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return encodeID(uint64(time.Now().UnixMilli()), uint64(binary.BigEndian.Uint16(b[:2])),
		binary.BigEndian.Uint64(b[8:]))
}

// link completes the workflow edges of jobs just written (or found written: a rerun):
// linkEdges, whose errors mark their job as not all linked (unlinked): enqueueing it
// again with the same ID completes it.
func (c *Client) link(ctx context.Context, jobs []prepared, results []BatchResult, inCall map[JobRef]int) {
	var edges []wfEdge
	var owners []int
	for i := range jobs {
		p := &jobs[i]
		if len(p.o.after) == 0 || (results[i].Err != nil && !(errors.Is(results[i].Err, ErrDuplicate) && !p.fresh)) {
			continue
		}
		to := JobRef{Queue: p.o.queue, ID: p.id}
		for _, from := range p.o.after {
			if k, ok := inCall[from]; ok && results[i].Err == nil && results[k].Err == nil {
				continue // registered by the dependency's own enqueue (registerInCall)
			}
			edges = append(edges, wfEdge{from: from, to: to})
			owners = append(owners, i)
		}
	}
	for k, err := range c.linkEdges(ctx, edges) {
		if err != nil {
			c.unlinked(ctx, results, owners[k], err)
		}
	}
}

// wfEdge is one workflow edge to link: job to waits on job from. retry: link.lua's retry
// mode, for a dependent a retry put back to waiting under the default policy (a dead
// dependency is waited on, not resolved).
type wfEdge struct {
	from, to JobRef
	retry    bool
}

// linkEdges links each edge's dependency in its own slot (link.lua), in one pipelined
// round trip, and resolves in the dependent's slot (resolve.lua) the edges whose
// dependency had ended already, in a second. The dependents exist, waiting with the edge
// in their pending set, before any link, so a dependency that ends after its link always
// finds its dependent. It returns one error per edge: nil when the edge is linked or
// resolved.
func (c *Client) linkEdges(ctx context.Context, edges []wfEdge) []error {
	errs := make([]error, len(edges))
	if len(edges) == 0 {
		return errs
	}
	calls := make([]*scriptCall, len(edges))
	for k, e := range edges {
		qk := c.queueKeys(e.from.Queue)
		mode := ""
		if e.retry {
			mode = "retry"
		}
		calls[k] = &scriptCall{script: scripts.Link,
			keys: []string{qk.job(e.from.ID), qk.dependents(e.from.ID)}, args: []any{e.to.member(), mode}}
	}
	c.runScripts(ctx, nil, calls)
	var resolves []*scriptCall
	var owners []int
	for k, call := range calls {
		e := edges[k]
		state, err := call.cmd.Text()
		if err != nil {
			errs[k] = fmt.Errorf("link %s after %s: %w", e.to, e.from, err)
			continue
		}
		if state == "pending" {
			continue
		}
		outcome := "dead"
		switch state {
		case "done":
			outcome = "done"
		case "waiting":
			// The dependency waits itself. If it waits, however indirectly, on the job
			// linked to it, this link closed a cycle (two calls raced, or a half-written
			// call was completed): the job dies of it, and the cycle with it.
			cycle, err := c.waitsOn(ctx, e.from, e.to)
			if err != nil {
				errs[k] = fmt.Errorf("link %s after %s: cycle check: %w", e.to, e.from, err)
			}
			if !cycle {
				continue
			}
			outcome = "cycle"
		}
		resolves = append(resolves, c.resolveCall("j", e.to, outcome, e.from))
		owners = append(owners, k)
	}
	if len(resolves) == 0 {
		return errs
	}
	c.runScripts(ctx, nil, resolves)
	for k, call := range resolves {
		if err := call.cmd.Err(); err != nil {
			errs[owners[k]] = fmt.Errorf("resolve %s: %w", edges[owners[k]].to, err)
		}
	}
	return errs
}

// relink links the dependencies of the dead jobs of queue a retry put back to waiting
// (retry.lua: res[i] is "waiting\n<policy>\n<after>" for such a job ids[i]) and leaves
// "waiting" in res for them. Under the default policy a dead dependency is waited on
// (link.lua's retry mode): a retried job runs only once its dependencies succeeded. The
// error, wrapping ErrUncertain, names the first job not fully linked: it waits on the
// dependencies not linked until it is cancelled and retried again.
func (c *Client) relink(ctx context.Context, queue string, ids, res []string) error {
	var edges []wfEdge
	for i, r := range res {
		state, rest, ok := strings.Cut(r, "\n")
		if !ok || state != "waiting" {
			continue
		}
		res[i] = state
		policy, after, _ := strings.Cut(rest, "\n")
		to := JobRef{Queue: queue, ID: ids[i]}
		for _, from := range parseAfter(after) {
			edges = append(edges, wfEdge{from: from, to: to, retry: policy != "run"})
		}
	}
	for k, err := range c.linkEdges(ctx, edges) {
		if err != nil {
			return fmt.Errorf("retry %s: %w (cancel it and retry it again to complete its links): %w",
				edges[k].to.ID, ErrUncertain, outcome(ctx, "link", err))
		}
	}
	return nil
}

// waitsOn reports whether job from waits, directly or through other waiting jobs, on job
// to: a walk up the pending sets (jobs:{q}:deps:<id>), one pipelined round trip per level,
// so its cost is the depth of from's waiting ancestors, paid only when a link finds its
// dependency waiting. It is sound without a lock: pending sets are written with their job,
// before any of its links, so of the links that close a cycle the last to walk sees it
// whole (both may: each kills its own job, and the cycle ends either way).
//
// The walk stops after cycleWalkLevels levels or cycleWalkJobs jobs: a chain built one
// enqueue at a time, each step while the one before waits, would otherwise pay a walk
// of the whole chain at every step (O(n^2) round trips in all). A cycle longer than that,
// closed by calls that race, is not seen and its jobs wait (cancel them).
func (c *Client) waitsOn(ctx context.Context, from, to JobRef) (bool, error) {
	target := to.member()
	seen := map[string]bool{from.member(): true}
	level := []JobRef{from}
	for depth := 0; len(level) > 0 && depth < cycleWalkLevels && len(seen) <= cycleWalkJobs; depth++ {
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.StringSliceCmd, len(level))
		for i, r := range level {
			cmds[i] = pipe.SMembers(ctx, c.queueKeys(r.Queue).deps(r.ID))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return false, err
		}
		var next []JobRef
		for _, cmd := range cmds {
			for _, m := range cmd.Val() {
				if m == target {
					return true, nil
				}
				if r, ok := parseMember(m); ok && !seen[m] {
					seen[m] = true
					next = append(next, r)
				}
			}
		}
		level = next
	}
	return false, nil
}

// cycleWalkLevels and cycleWalkJobs bound waitsOn's walk (see there).
const (
	cycleWalkLevels = 32
	cycleWalkJobs   = 10_000
)

// registerInCall gives each job of a call that another job of the same call waits on
// the dependents it has there, which its enqueue registers in the same step as it is
// written (enqueue.lua): such an edge needs no link, and the dependency cannot end before
// it is registered, however short its done record is kept. It returns those edges'
// dependencies, with their index in jobs. An edge whose dependency was not written by
// this call (a duplicate ID, an error) is linked as usual.
func registerInCall(jobs []prepared) map[JobRef]int {
	var at map[JobRef]int
	for i := range jobs {
		if len(jobs[i].o.after) > 0 {
			at = make(map[JobRef]int, len(jobs))
			break
		}
	}
	if at == nil {
		return nil
	}
	for i := range jobs {
		at[JobRef{Queue: jobs[i].o.queue, ID: jobs[i].id}] = i
	}
	in := map[JobRef]int{}
	for i := range jobs {
		for _, from := range jobs[i].o.after {
			if k, ok := at[from]; ok && k != i {
				jobs[k].o.dependents = append(jobs[k].o.dependents, JobRef{Queue: jobs[i].o.queue, ID: jobs[i].id}.member())
				in[from] = k
			}
		}
	}
	return in
}

// checkCycles refuses a call whose jobs wait on each other in a cycle (ErrInvalid naming
// it, "q/A -> q/B -> q/A": A waits on B, which waits on A), before anything is written:
// such jobs could never leave waiting. A job's dependencies are fixed when it is written,
// so a dependency enqueued by an earlier call cannot wait on a job of this one; see
// DESIGN.md, "Workflows", for calls that race.
func checkCycles(jobs []prepared) error {
	if !slices.ContainsFunc(jobs, func(p prepared) bool { return len(p.o.after) > 0 }) {
		return nil
	}
	at := make(map[JobRef]int, len(jobs))
	for k := range jobs {
		at[JobRef{Queue: jobs[k].o.queue, ID: jobs[k].id}] = k
	}
	// Depth-first, iteratively (a chain may be long): 1 = on the path, 2 = no cycle through it.
	mark := make([]byte, len(jobs))
	type frame struct{ job, next int }
	for start := range jobs {
		if mark[start] != 0 {
			continue
		}
		path := []frame{{start, 0}}
		mark[start] = 1
		for len(path) > 0 {
			top := &path[len(path)-1]
			after := jobs[top.job].o.after
			if top.next == len(after) {
				mark[top.job] = 2
				path = path[:len(path)-1]
				continue
			}
			k, ok := at[after[top.next]]
			top.next++
			if !ok || mark[k] == 2 {
				continue
			}
			if mark[k] == 1 {
				var names []string
				for i := range path {
					if len(names) > 0 || path[i].job == k {
						names = append(names, JobRef{Queue: jobs[path[i].job].o.queue, ID: jobs[path[i].job].id}.String())
					}
				}
				names = append(names, names[0])
				return invalid("dependency cycle %s: these jobs would wait on each other for ever",
					strings.Join(names, " -> "))
			}
			mark[k] = 1
			path = append(path, frame{k, 0})
		}
	}
	return nil
}

// unlinked marks a job whose workflow edges were not all registered: it is written
// (waiting), and enqueueing it again with its ID completes it.
func (c *Client) unlinked(ctx context.Context, results []BatchResult, i int, err error) {
	if results[i].Err == nil || errors.Is(results[i].Err, ErrDuplicate) {
		results[i].Err = fmt.Errorf("%w (enqueue it again with the same ID to complete its links): %w",
			ErrUncertain, outcome(ctx, "link", err))
	}
}

// resolveCall is the resolve.lua call that tells target (a waiting job, kind "j", or a
// batch, kind "b") in its own slot that sources ended with outcome.
func (c *Client) resolveCall(kind string, target JobRef, outcome string, sources ...JobRef) *scriptCall {
	qk := c.queueKeys(target.Queue)
	args := make([]any, 0, 7+len(sources))
	args = append(args, qk.jobPrefix, kind, target.ID, outcome, ms(c.cfg.DeadRetention), c.cfg.DeadMax, c.eventsMax())
	for _, s := range sources {
		args = append(args, s.member())
	}
	return &scriptCall{script: scripts.Resolve, keys: []string{qk.events}, args: args}
}

// Dependency is one dependency of a job and how it stands.
type Dependency struct {
	JobRef
	// State is the dependency's state; "" when its record is gone (purged, deleted, or
	// its done record expired after Config.DoneRetention).
	State State
	// Pending: the dependent still waits for this one.
	Pending bool
	// Result is what its handler returned, when it is done.
	Result []byte
}

// Dependencies returns the dependencies of job (a job enqueued with After or AfterJob),
// in the order given, with their state and result, and whether the job still waits for
// each: a handler reads its dependencies' results with it. Two round trips (one when the
// job is not waiting); nil for a job without dependencies.
func (c *Client) Dependencies(ctx context.Context, job *Job) ([]Dependency, error) {
	if len(job.After) == 0 {
		return nil, nil
	}
	deps := make([]Dependency, len(job.After))
	pipe := c.rdb.Pipeline()
	members := make([]any, len(job.After))
	hashes := make([]interface{ Val() []any }, len(job.After))
	for i, r := range job.After {
		deps[i].JobRef = r
		members[i] = r.member()
		hashes[i] = pipe.HMGet(ctx, c.queueKeys(r.Queue).job(r.ID), "state", "result")
	}
	// Only the dependencies asked about: a job may wait on thousands.
	pending := pipe.SMIsMember(ctx, c.queueKeys(job.Queue).deps(job.ID), members...)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("dependencies of %s: %w", job.ID, err)
	}
	waiting := pending.Val()
	for i := range deps {
		v := hashes[i].Val()
		if s, ok := v[0].(string); ok {
			deps[i].State = State(s)
		}
		if s, ok := v[1].(string); ok && deps[i].State == StateDone {
			deps[i].Result = []byte(s)
		}
		deps[i].Pending = i < len(waiting) && waiting[i]
	}
	return deps, nil
}

// parseAfter reads a job hash's after field: "queue\tid" lines.
func parseAfter(v string) []JobRef {
	var out []JobRef
	for _, line := range strings.Split(v, "\n") {
		if r, ok := parseMember(line); ok {
			out = append(out, r)
		}
	}
	return out
}

// Dependent is a job enqueued after another, and its state now.
type Dependent struct {
	JobRef
	// State is the dependent's state; "" when its record is gone.
	State State
}

// Dependents returns up to max of the jobs enqueued after job (After or AfterJob naming
// it) while it has not ended, sorted, with their state now (one may have died of another
// dependency since), and how many there are in all; none once job ended (its end
// resolved them), except the retried jobs that wait on it while it is dead (Retry). The cost does not grow with their number: of more than max, max are
// picked at random. Two round trips. A max under 1 is ErrInvalid.
func (c *Client) Dependents(ctx context.Context, job *Job, max int) ([]Dependent, int, error) {
	if max < 1 {
		return nil, 0, invalid("dependents of %s: max %d: want at least 1", job.ID, max)
	}
	key := c.queueKeys(job.Queue).dependents(job.ID)
	pipe := c.rdb.Pipeline()
	total := pipe.SCard(ctx, key)
	some := pipe.SRandMemberN(ctx, key, int64(max)) // distinct members, O(max)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, fmt.Errorf("dependents of %s: %w", job.ID, err)
	}
	var out []Dependent
	for _, m := range some.Val() {
		if r, ok := parseMember(m); ok {
			out = append(out, Dependent{JobRef: r})
		}
	}
	if len(out) == 0 {
		return nil, int(total.Val()), nil
	}
	slices.SortFunc(out, func(a, b Dependent) int { return strings.Compare(a.String(), b.String()) })
	pipe = c.rdb.Pipeline()
	states := make([]*redis.StringCmd, len(out))
	for i, d := range out {
		states[i] = pipe.HGet(ctx, c.queueKeys(d.Queue).job(d.ID), "state")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("dependents of %s: %w", job.ID, err)
	}
	for i := range out {
		out[i].State = State(states[i].Val())
	}
	return out, int(total.Val()), nil
}
