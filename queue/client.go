package queue

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/coalesce"
	"github.com/jobs-dev/jobs/scripts"
)

// Defaults for Config's zero fields.
const (
	DefaultPrefix        = "jobs"
	DefaultMaxPayload    = 1 << 20 // 1 MiB
	DefaultDoneRetention = 24 * time.Hour
	DefaultDeadRetention = 30 * 24 * time.Hour
	DefaultDeadMax       = 10_000
	DefaultDoneMax       = 10_000
	DefaultEvents        = 10_000
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
	// Events is about how many entries each queue's stream keeps (see [Client.Events]):
	// every script call of this Client that changes jobs appends its events in entries of
	// up to 16, in the same script (one entry of one event for a single job's transition;
	// a worker's acks and claims of one round trip, a batch enqueue or a reap share
	// entries), and Redis drops the oldest entries past this (in whole blocks, so a few
	// more may stay). It counts entries, not events, because Redis caps a stream by
	// entries: the stream keeps at least this many events and at most 16 times as many.
	// Negative: this Client writes no events at all. A reader more than this many entries
	// behind gets [ErrEventsGap]; raise it if `jobs tail` consumers fall that far behind.
	// An entry of one event costs Redis about 75 bytes, an event in a full entry about
	// 60, so the default keeps between about 750 KB and 10 MB per queue. Default: 10000.
	Events int
}

func (c Config) withDefaults() Config {
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.MaxPayload = cmp.Or(c.MaxPayload, DefaultMaxPayload)
	c.DoneRetention = cmp.Or(c.DoneRetention, DefaultDoneRetention)
	c.DeadRetention = cmp.Or(c.DeadRetention, DefaultDeadRetention)
	c.DeadMax = cmp.Or(c.DeadMax, DefaultDeadMax)
	c.DoneMax = cmp.Or(c.DoneMax, DefaultDoneMax)
	c.Events = cmp.Or(c.Events, DefaultEvents)
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
	rdb   redis.UniversalClient
	cfg   Config
	keys  keys
	known sync.Map // queue name -> time.Time it was last added to the queues set
	// reregister: a queue is added to the queues set again by the first enqueue on it this
	// long after the last time (reregisterEvery; shorter in tests).
	reregister time.Duration
	qkeys      sync.Map // queue name -> queueKeys, built once rather than on every enqueue
	token      string   // random per Client: lease tokens are token + seq + index
	tokens     atomic.Uint64
	ids        idGen // generated job IDs, monotonic per Client

	// Concurrent single Enqueue and Ack calls are coalesced into one script call per
	// queue (see internal/coalesce): a web server's many small enqueues, or a worker's
	// many finishing jobs, share round trips without any added delay.
	enqueues *coalesce.Batcher[prepared, BatchResult]
	acks     *coalesce.Batcher[ackItem, error]

	clusterWait *clusterWaiter // set on a Redis Cluster: Wait on queues in several slots

	loading loadFlight // the load of every script in flight, shared (loadScripts)
}

// NewClient returns a Client over rdb, which may be a single node, a Sentinel-backed or a
// Cluster client.
//
// Over a *redis.Client (single node or Sentinel) that has not connected yet, as right after
// redis.NewClient, NewClient adds a dial hook to it (AddHook) that wraps each connection,
// so that a lone Enqueue with a context that can end runs on its caller's goroutine and
// still returns as the context ends (the hook cuts that connection's read short, and
// go-redis drops it). Over a client that has connected already, or another kind, such an
// Enqueue waits on a goroutine of the Client's instead: the same guarantees, and two
// goroutine hand-offs more per call (20-40 us on a 2-CPU machine).
func NewClient(rdb redis.UniversalClient, cfg Config) (*Client, error) {
	if rdb == nil {
		return nil, invalid("nil Redis client")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{rdb: rdb, cfg: cfg, keys: keys{cfg.Prefix}, reregister: reregisterEvery,
		token: strconv.FormatUint(rand.Uint64(), 36)}
	c.enqueues = coalesce.New(coalesceMax, c.enqueueCoalesced)
	if in := newInterrupter(rdb); in != nil {
		c.enqueues.Interrupt = func(ctx context.Context, p prepared) (func(), bool) {
			// The job ID must be in the first piece go-redis writes, a buffer's worth: the
			// command, the script's hash, the keys, prefix and type come before it (256:
			// more than the rest of what RESP writes before it).
			qk := c.queueKeys(p.o.queue)
			before := 256 + len(qk.ready) + len(qk.scheduled) + len(qk.wake) + len(qk.events) + len(qk.jobPrefix) +
				len(p.typ) + len(p.id)
			if before > in.bufSize || !p.oneJobPath() {
				return nil, false
			}
			return in.arm(ctx, p.id)
		}
	}
	c.acks = coalesce.New(coalesceMax, c.ackCoalesced)
	if _, ok := rdb.(*redis.ClusterClient); ok {
		c.clusterWait = &clusterWaiter{c: c, inflight: map[popKey]bool{}}
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

// Config returns the client's configuration with defaults applied.
func (c *Client) Config() Config { return c.cfg }

// Enqueue adds one job of the given type and returns its ID. With no option it is due now
// on the "default" queue. When [ID] names a job that exists, or a [Unique] job's key is
// held, it returns the existing job's ID and ErrDuplicate.
//
// Enqueue returns when ctx ends, whatever the Redis client's timeouts. A ctx done before
// the job was sent gives ctx's error, and nothing is written. A job that was sent but got
// no reply (ctx ended, connection lost) gives the job's ID and an error wrapping
// [ErrUncertain] and the cause: it may or may not have been written. For go-redis to stop
// waiting at the deadline as well (and free the connection), build the Redis client with
// ContextTimeoutEnabled; otherwise it waits up to its ReadTimeout in the background.
//
// Concurrent Enqueue calls share script calls, at most two in flight (see
// internal/coalesce).
func (c *Client) Enqueue(ctx context.Context, typ string, payload []byte, opts ...Option) (string, error) {
	job, err := c.prepare(BatchJob{Type: typ, Payload: payload, Options: opts}, time.Now())
	if err != nil {
		return "", err
	}
	if len(job.o.after) > 0 { // a workflow: written, then linked (workflow.go)
		res := c.enqueuePrepared(ctx, []prepared{job})
		c.link(ctx, []prepared{job}, res, nil)
		if errors.Is(res[0].Err, ErrUncertain) {
			return job.id, res[0].Err
		}
		return res[0].ID, res[0].Err
	}
	res, err := c.enqueues.Do(ctx, job)
	if errors.Is(err, coalesce.ErrInFlight) {
		return job.id, fmt.Errorf("enqueue: %w: %w", ErrUncertain, ctx.Err())
	}
	if err != nil {
		return "", err
	}
	if errors.Is(res.Err, ErrUncertain) {
		return job.id, res.Err
	}
	return res.ID, res.Err
}

// coalesceMax bounds a coalesced batch: one script call of at most this many jobs.
const coalesceMax = 256

// enqueueCoalesced enqueues concurrent Enqueue calls together. Each job was checked by
// its caller, so only a Redis error can fail a job.
func (c *Client) enqueueCoalesced(ctx context.Context, jobs []prepared) []BatchResult {
	return c.enqueuePrepared(ctx, jobs)
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
// jobs of one group cost two arguments each, one more when unique and one more when keyed.
type group struct {
	typ                           string
	maxRetry                      int
	timeout, delay, at, uniqueTTL int64 // ms; at 0 = use delay; uniqueTTL 0 = not unique
	excl                          string
	limitKey                      string // "\t" for keyed jobs (each gives its own key), "" none
	keep, fresh                   bool
	meta                          string // key\tvalue\tkey\tvalue...; "" = none
	after                         string // policy\tqueue\tid...; "" = no dependencies
	batch                         string // queue\tbatch; "" = in no batch
	dependents                    string // queue\tid...: its dependents in the same call
}

func (p *prepared) group() group {
	g := group{typ: p.typ, maxRetry: p.o.maxRetry, timeout: ms(p.o.timeout),
		delay: ms(p.o.delay), fresh: p.fresh}
	if p.o.limitKey != "" {
		// Each job gives its own key (enqueue.lua): keyed jobs of many keys, as a batch
		// of many customers' jobs, share one group instead of a group each.
		g.limitKey = "\t"
	}
	if !p.o.at.IsZero() {
		g.at = max(p.o.at.UnixMilli(), 1) // 0 means "use delay" to the script
	}
	if p.ukey != "" {
		g.uniqueTTL, g.keep = max(ms(p.o.uniqueTTL), 1), p.o.uniqueKeep
	}
	if p.o.exclusive {
		g.excl = cmp.Or(p.o.exclKey, p.typ)
	}
	if len(p.o.meta) > 0 {
		g.meta = strings.Join(p.o.meta, "\t")
	}
	g.after, g.batch, g.dependents = p.o.afterArg(), p.o.batch, strings.Join(p.o.dependents, "\t")
	return g
}

// flag is a boolean as the scripts take it: "1" or "".
func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
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
	if err := ValidateType(job.Type); err != nil {
		return o, err
	}
	if len(job.Payload) > c.cfg.MaxPayload {
		return o, fmt.Errorf("%w: %d bytes, the limit is %d (queue.Config.MaxPayload)",
			ErrPayloadTooLarge, len(job.Payload), c.cfg.MaxPayload)
	}
	return o, nil
}

// register returns the queue names this Client has not added to the queues set within
// c.reregister; they are added in the same pipeline as the enqueue.
func (c *Client) register(queues []string) []string {
	var fresh []string
	for _, q := range queues {
		if at, ok := c.known.Load(q); !ok || time.Since(at.(time.Time)) >= c.reregister {
			fresh = append(fresh, q)
		}
	}
	return fresh
}

// reregisterEvery is how often a long-lived Client adds the queues it enqueues on to the
// queues set again (one SADD in an enqueue's pipeline, once per queue): a Redis restarted
// without persistence, flushed, or failed over to a replica that missed the write loses
// the set, and readers (jobs ls and stats, the dashboard) know a queue only from it, while
// the Client remembered it as added. A queue comes back with its next enqueue after this.
const reregisterEvery = 15 * time.Second

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
// outcome, error included, is in its cmd: one queue's failure is not another's.
//
// A failed SADD fails no job: the jobs were written all the same. It is tried once more
// alone when a job was written, and a queue not registered is registered by this
// Client's next enqueue on it (only a registered queue is marked known).
func (c *Client) runScripts(ctx context.Context, newQueues []string, calls []*scriptCall) {
	if len(calls) == 1 && len(newQueues) == 0 { // the common case: no pipeline machinery
		call := calls[0]
		call.cmd = call.script.Run(ctx, c.rdb, call.keys, call.args...)
		return
	}
	pending := calls
	var sadd *redis.IntCmd
	for attempt := 0; ; attempt++ {
		pipe := c.rdb.Pipeline()
		if len(newQueues) > 0 && attempt == 0 {
			sadd = pipe.SAdd(ctx, c.keys.queues(), toAny(newQueues)...)
		}
		for _, call := range pending {
			call.cmd = call.script.EvalSha(ctx, pipe, call.keys, call.args...)
		}
		_, _ = pipe.Exec(ctx)
		var again []*scriptCall
		for _, call := range pending {
			if err := call.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
				again = append(again, call)
			}
		}
		if len(again) == 0 {
			break
		}
		if err := c.loadScripts(ctx); err != nil {
			break // the calls left keep their NOSCRIPT error: they did not run
		}
		pending = again
	}
	if sadd == nil {
		return
	}
	if sadd.Err() != nil && slices.ContainsFunc(calls, func(call *scriptCall) bool { return call.cmd.Err() == nil }) {
		sadd = c.rdb.SAdd(ctx, c.keys.queues(), toAny(newQueues)...)
	}
	if sadd.Err() == nil {
		now := time.Now()
		for _, q := range newQueues {
			c.known.Store(q, now)
		}
	}
}

// loadFlight is a Client's one load of every script at a time. After a Redis restart
// or failover, every caller meets NOSCRIPT at once: each loading all the scripts itself,
// a hundred concurrent batch enqueues sent 1,050 SCRIPT LOADs, each script's whole text;
// sharing the load in flight sends one of each.
type loadFlight struct {
	mu  sync.Mutex
	cur *scriptLoad // the load in flight; nil when none
}

// scriptLoad is one load of every script: done is closed when it ends, with err.
type scriptLoad struct {
	done chan struct{}
	err  error
}

// loadScripts loads every script into Redis's script cache (on every master of a
// cluster), or waits for the load another call of this Client started, and returns its
// outcome. When that load failed (its caller's context ended, say), this call loads them
// itself: a load shared is never worse than one of its own.
func (c *Client) loadScripts(ctx context.Context) error {
	c.loading.mu.Lock()
	if l := c.loading.cur; l != nil {
		c.loading.mu.Unlock()
		select {
		case <-l.done:
			if l.err == nil {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		return c.loadAllScripts(ctx)
	}
	l := &scriptLoad{done: make(chan struct{})}
	c.loading.cur = l
	c.loading.mu.Unlock()
	l.err = c.loadAllScripts(ctx)
	c.loading.mu.Lock()
	c.loading.cur = nil
	c.loading.mu.Unlock()
	close(l.done)
	return l.err
}

// loadAllScripts loads every script into Redis's script cache (on every master of a
// cluster).
func (c *Client) loadAllScripts(ctx context.Context) error {
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
