package queue

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobs-dev/jobs/internal/coalesce"
	"github.com/jobs-dev/jobs/scripts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Defaults for Config's zero fields.
const (
	DefaultPrefix        = "jobs"
	DefaultMaxPayload    = 1 << 20 // 1 MiB
	DefaultDoneRetention = 24 * time.Hour
	DefaultDeadRetention = 30 * 24 * time.Hour
	DefaultDeadMax       = 10_000
	DefaultDoneMax       = 10_000
)

// Config configures a Client. The zero value is valid: every zero field means its
// documented default.
type Config struct {
	// Prefix starts every key, so several systems can share one Redis. Default: "jobs".
	Prefix string
	// MaxPayload is the largest payload Enqueue accepts, in bytes. Redis holds every
	// pending payload in memory: raise it only knowingly. Default: 1 MiB.
	MaxPayload int
	// DoneRetention is how long a succeeded job's hash stays readable (jobs inspect) before
	// Redis expires it. Negative: deleted as soon as it succeeds. Default: 24h.
	DoneRetention time.Duration
	// DeadRetention is how long a dead job stays in the dead set for inspection and
	// `jobs retry`. Default: 30 days (720h).
	DeadRetention time.Duration
	// DeadMax caps the dead set per queue; the oldest dead jobs are deleted past it.
	// Default: 10000.
	DeadMax int
	// DoneMax caps how many done jobs a queue keeps within DoneRetention; the oldest are
	// deleted past it, so retention cannot grow with throughput. Default: 10000.
	DoneMax int
	// Registerer receives jobs_enqueued_total{queue,type}. Default: nil, no metrics.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.MaxPayload = cmp.Or(c.MaxPayload, DefaultMaxPayload)
	c.DoneRetention = cmp.Or(c.DoneRetention, DefaultDoneRetention)
	c.DeadRetention = cmp.Or(c.DeadRetention, DefaultDeadRetention)
	c.DeadMax = cmp.Or(c.DeadMax, DefaultDeadMax)
	c.DoneMax = cmp.Or(c.DoneMax, DefaultDoneMax)
	return c
}

func (c Config) validate() error {
	switch {
	case c.MaxPayload < 0:
		return invalid("Config.MaxPayload %d is negative", c.MaxPayload)
	case c.DeadRetention < 0:
		return invalid("Config.DeadRetention %s is negative", c.DeadRetention)
	case c.DeadMax < 0:
		return invalid("Config.DeadMax %d is negative", c.DeadMax)
	case c.DoneMax < 0:
		return invalid("Config.DoneMax %d is negative", c.DoneMax)
	}
	for _, r := range c.Prefix {
		if r == '{' || r == '}' || r <= ' ' {
			return invalid("Config.Prefix %q: no braces, spaces or control characters", c.Prefix)
		}
	}
	return nil
}

// Client enqueues jobs and runs every state transition on Redis. It is safe for
// concurrent use; create one per process and share it.
type Client struct {
	rdb    redis.UniversalClient
	cfg    Config
	keys   keys
	known  sync.Map // queue name -> struct{}: already added to the queues set
	qkeys  sync.Map // queue name -> queueKeys, built once rather than on every enqueue
	token  string   // random per Client: lease tokens are token + seq + index
	tokens atomic.Uint64
	ids    idGen // generated job IDs, monotonic per Client

	enqueued *prometheus.CounterVec // nil without Config.Registerer

	// Concurrent single Enqueue and Ack calls are coalesced into one script call per
	// queue (see internal/coalesce): a web server's many small enqueues, or a worker's
	// many finishing jobs, share round trips without any added delay.
	enqueues *coalesce.Batcher[prepared, BatchResult]
	acks     *coalesce.Batcher[ackItem, error]

	clusterWait *clusterWaiter // set on a Redis Cluster: Wait on queues in several slots
}

// NewClient returns a Client over rdb, which may be a single node, a Sentinel-backed or a
// Cluster client.
func NewClient(rdb redis.UniversalClient, cfg Config) (*Client, error) {
	if rdb == nil {
		return nil, invalid("nil Redis client")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{rdb: rdb, cfg: cfg, keys: keys{cfg.Prefix},
		token: strconv.FormatUint(rand.Uint64(), 36)}
	c.enqueues = coalesce.New(coalesceMax, c.enqueueCoalesced)
	c.acks = coalesce.New(coalesceMax, c.ackCoalesced)
	if _, ok := rdb.(*redis.ClusterClient); ok {
		c.clusterWait = &clusterWaiter{c: c, inflight: map[string]bool{}}
	}
	if cfg.Registerer != nil {
		c.enqueued = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobs_enqueued_total", Help: "Jobs enqueued by this client (duplicates not counted), by queue and type.",
		}, []string{"queue", "type"})
		if err := cfg.Registerer.Register(c.enqueued); err != nil {
			return nil, fmt.Errorf("queue: register metrics: %w", err)
		}
	}
	return c, nil
}

// queueKeys returns the keys of queue q, from a cache: building them takes ten string
// concatenations, a cost on every single Enqueue otherwise.
func (c *Client) queueKeys(q string) queueKeys {
	if qk, ok := c.qkeys.Load(q); ok {
		return qk.(queueKeys)
	}
	qk := c.keys.queue(q)
	c.qkeys.Store(q, qk)
	return qk
}

// Redis returns the client's Redis connection.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Config returns the client's configuration with defaults applied.
func (c *Client) Config() Config { return c.cfg }

// Enqueue adds one job of the given type and returns its ID. With no option it is due now
// on the "default" queue. When [ID] names a job that exists, or a [Unique] job's key is
// held, it returns the existing job's ID and ErrDuplicate.
func (c *Client) Enqueue(ctx context.Context, typ string, payload []byte, opts ...Option) (string, error) {
	job, err := c.prepare(BatchJob{Type: typ, Payload: payload, Options: opts}, time.Now())
	if err != nil {
		return "", err
	}
	res, err := c.enqueues.Do(ctx, job)
	if err != nil {
		return "", err
	}
	return res.ID, res.Err
}

// coalesceMax bounds a coalesced batch: one script call of at most this many jobs.
const coalesceMax = 256

// enqueueCoalesced enqueues concurrent Enqueue calls together. Each job was checked by
// its caller, so only a Redis error can fail the batch, and it fails each job alike.
func (c *Client) enqueueCoalesced(jobs []prepared) []BatchResult {
	res, err := c.enqueuePrepared(context.Background(), jobs)
	if err != nil {
		res = make([]BatchResult, len(jobs))
		for i := range res {
			res[i].Err = err
		}
	}
	return res
}

// BatchJob is one job given to [Client.EnqueueBatch].
type BatchJob struct {
	Type    string
	Payload []byte
	Options []Option
}

// BatchResult is the outcome for one job of a batch: its ID, and Err = ErrDuplicate when a
// job with that ID already existed, or a unique job's key was held (ID is then the
// holder's); nothing was written for a duplicate. Err is a Redis error when the script
// call of this job's queue failed while another queue's succeeded.
type BatchResult struct {
	ID  string
	Err error
}

// batchChunk is how many jobs go into one script call: large enough to amortise the call,
// small enough that one call does not stall Redis for other clients (~1 ms).
const batchChunk = 500

// EnqueueBatch adds many jobs in one round trip (one script call per queue and per 500
// jobs, pipelined). Every job is validated before anything is written: a bad job fails the
// whole batch with an error naming its index. Results are in input order.
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
	return c.enqueuePrepared(ctx, prep)
}

// prepared is a job that passed validation, with its options resolved and its ID chosen:
// the work Enqueue does once, before coalescing, and EnqueueBatch once per job.
type prepared struct {
	typ     string
	payload []byte
	id      string
	fresh   bool   // id was generated here, not chosen by the caller
	ukey    string // the unique key (jobs:{q}:unique:<k>); "" = not unique
	o       options
}

// prepare validates job (see Check) and fills in what its script call needs.
func (c *Client) prepare(job BatchJob, now time.Time) (prepared, error) {
	o, err := c.check(job)
	if err != nil {
		return prepared{}, err
	}
	p := prepared{typ: job.Type, payload: job.Payload, id: o.id, o: o}
	if p.id == "" {
		p.id, p.fresh = c.ids.next(now), true
	}
	if o.uniqueTTL > 0 {
		k := o.uniqueKey
		if k == "" {
			sum := sha256.Sum256(append([]byte(job.Type+"\x00"), job.Payload...))
			k = job.Type + ":" + hex.EncodeToString(sum[:16])
		}
		p.ukey = c.queueKeys(o.queue).unique(k)
	}
	return p, nil
}

// group is what the script takes once for a run of jobs that share it (see enqueue.lua):
// jobs of one group cost two arguments each (three when unique).
type group struct {
	typ                           string
	maxRetry                      int
	timeout, delay, at, uniqueTTL int64 // ms; at 0 = use delay; uniqueTTL 0 = not unique
	excl                          string
	keep, fresh                   bool
}

func (p *prepared) group() group {
	g := group{typ: p.typ, maxRetry: p.o.maxRetry, timeout: ms(p.o.timeout),
		delay: ms(p.o.delay), fresh: p.fresh}
	if !p.o.at.IsZero() {
		g.at = max(p.o.at.UnixMilli(), 1) // 0 means "use delay" to the script
	}
	if p.ukey != "" {
		g.uniqueTTL, g.keep = max(ms(p.o.uniqueTTL), 1), p.o.uniqueKeep
	}
	if p.o.exclusive {
		g.excl = cmp.Or(p.o.exclKey, p.typ)
	}
	return g
}

// flag is a boolean as the scripts take it: "1" or "".
func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
}

// enqueuePrepared enqueues jobs that passed prepare: one script call per queue and per
// batchChunk jobs, pipelined.
func (c *Client) enqueuePrepared(ctx context.Context, jobs []prepared) ([]BatchResult, error) {
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
				keys: []string{qk.ready, qk.scheduled, qk.wake}, args: c.enqueueArgs(qk, jobs, chunk)})
			owners = append(owners, chunk)
		}
	}
	if err := c.runScripts(ctx, c.register(order), calls); err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	for k, call := range calls {
		err := readEnqueueReply(call.cmd, results, owners[k])
		if err != nil { // this queue's call failed; the others' jobs are enqueued
			for _, i := range owners[k] {
				results[i].Err = fmt.Errorf("enqueue: %w", err)
			}
		}
	}
	c.countEnqueued(jobs, results)
	return results, nil
}

// enqueueArgs is the ARGV of one enqueue.lua call for jobs[i], i in chunk: runs of jobs
// with the same settings share one group header. A call with caller-chosen IDs carries a
// nonce, stored in those jobs' hashes: if go-redis resends the call after a lost reply,
// the script recognizes its own jobs instead of reporting them as duplicates.
func (c *Client) enqueueArgs(qk queueKeys, jobs []prepared, chunk []int) []any {
	args := make([]any, 2, 12+2*len(chunk))
	args[0], args[1] = qk.jobPrefix, ""
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
			args = append(args, 0, g.typ, g.maxRetry, g.timeout, g.delay, g.at, g.excl,
				g.uniqueTTL, flag(g.keep), flag(g.fresh))
		}
		args = append(args, p.id, p.payload)
		if p.ukey != "" {
			args = append(args, p.ukey)
		}
		count++
	}
	args[at] = count
	return args
}

// readEnqueueReply fills in the results of the jobs of one enqueue.lua call from its reply:
// a string with one code per job, then the ID of each holder of a unique key.
func readEnqueueReply(cmd *redis.Cmd, results []BatchResult, owners []int) error {
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

// Check validates a job as EnqueueBatch would (type, payload size, options) without
// writing anything, so a caller reading jobs from a file can report the bad one exactly.
func (c *Client) Check(job BatchJob) error {
	_, err := c.check(job)
	return err
}

// check is Check returning the job's resolved options.
func (c *Client) check(job BatchJob) (options, error) {
	o, err := resolve(job.Options)
	if err != nil {
		return o, err
	}
	if err := validateType(job.Type); err != nil {
		return o, err
	}
	if len(job.Payload) > c.cfg.MaxPayload {
		return o, fmt.Errorf("%w: %d bytes, the limit is %d (queue.Config.MaxPayload)",
			ErrPayloadTooLarge, len(job.Payload), c.cfg.MaxPayload)
	}
	return o, nil
}

// countEnqueued adds the batch's new jobs to jobs_enqueued_total.
func (c *Client) countEnqueued(jobs []prepared, results []BatchResult) {
	if c.enqueued == nil {
		return
	}
	for i, r := range results {
		if r.Err == nil && r.ID != "" {
			c.enqueued.WithLabelValues(jobs[i].o.queue, jobs[i].typ).Inc()
		}
	}
}

// register returns the queue names not yet added to the queues set by this Client; they
// are added in the same pipeline as the enqueue (once per queue per Client, not per job).
func (c *Client) register(queues []string) []string {
	var fresh []string
	for _, q := range queues {
		if _, ok := c.known.Load(q); !ok {
			fresh = append(fresh, q)
		}
	}
	return fresh
}

// scriptCall is one script invocation inside a pipeline.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// runScripts sends calls (and an SADD of newQueues to the queues set) in one pipeline,
// by EVALSHA. Calls refused with NOSCRIPT (Redis restarted or its script cache was
// flushed) did not run; they are sent again once the scripts are loaded. Each call's own
// outcome, error included, is in its cmd: one queue's failure is not another's. The
// error returned is the first call's error when every call failed, or a failure to
// register the queues or load the scripts.
func (c *Client) runScripts(ctx context.Context, newQueues []string, calls []*scriptCall) error {
	if len(calls) == 1 && len(newQueues) == 0 { // the common case: no pipeline machinery
		call := calls[0]
		call.cmd = call.script.Run(ctx, c.rdb, call.keys, call.args...)
		return call.cmd.Err()
	}
	pending := calls
	for attempt := 0; ; attempt++ {
		pipe := c.rdb.Pipeline()
		var sadd *redis.IntCmd
		if len(newQueues) > 0 && attempt == 0 {
			members := make([]any, len(newQueues))
			for i, q := range newQueues {
				members[i] = q
			}
			sadd = pipe.SAdd(ctx, c.keys.queues(), members...)
		}
		for _, call := range pending {
			call.cmd = call.script.EvalSha(ctx, pipe, call.keys, call.args...)
		}
		_, _ = pipe.Exec(ctx)
		if sadd != nil {
			if err := sadd.Err(); err != nil {
				return err
			}
			for _, q := range newQueues {
				c.known.Store(q, struct{}{})
			}
		}
		var again []*scriptCall
		for _, call := range pending {
			if err := call.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
				again = append(again, call)
			}
		}
		if len(again) == 0 {
			for _, call := range calls {
				if call.cmd.Err() == nil {
					return nil
				}
			}
			return calls[0].cmd.Err()
		}
		if err := c.loadScripts(ctx); err != nil {
			return err
		}
		pending = again
	}
}

// loadScripts loads every script into Redis's script cache (on every master of a cluster).
func (c *Client) loadScripts(ctx context.Context) error {
	load := func(ctx context.Context, r redis.Scripter) error {
		for _, s := range scripts.All {
			if err := s.Load(ctx, r).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return load(ctx, m)
		})
	}
	return load(ctx, c.rdb)
}

// run runs one script, by EVALSHA with EVAL as fallback.
func (c *Client) run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return s.Run(ctx, c.rdb, keys, args...)
}

var errBadReply = errors.New("queue: unexpected script reply")

// ExclusiveLock returns the name of the lock an exclusive job with the given key runs
// under (see [Exclusive]).
func (c *Client) ExclusiveLock(key string) string { return c.keys.exclusiveLock(key) }
