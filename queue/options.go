package queue

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults for a job's settings when no option gives them.
const (
	DefaultQueue    = "default"
	DefaultMaxRetry = 10
	DefaultTimeout  = 30 * time.Minute

	// MaxRetryLimit is the largest MaxRetry a job may have: about nine years of retries at
	// the default 5-minute backoff cap, far past any real need, and far from where an
	// attempt count (max_retry + 1) could overflow. MaxRetry(n) refuses a larger n.
	MaxRetryLimit = 1_000_000
	// MinTimeout is the smallest Timeout a job may have: the job hash stores whole
	// milliseconds, so a shorter one would be stored as 0 and read back as the default.
	// Timeout(d) refuses a positive d under it rather than silently rounding.
	MinTimeout = time.Millisecond
)

// Option sets one per-job setting at enqueue. Each CLI flag of `jobs enqueue` maps onto one.
type Option func(*options)

type options struct {
	queue       string
	id          string
	delay       time.Duration
	at          time.Time
	maxRetry    int
	maxRetrySet bool
	timeout     time.Duration
	uniqueTTL   time.Duration
	uniqueKey   string
	uniqueKeep  bool
	exclusive   bool
	exclKey     string
	limitKey    string
	meta        []string // key, value, key, value... in the order given
	after       []JobRef // dependencies (After, AfterJob); a queue of "" = the job's own
	depRun      bool     // IgnoreDependencyFailure: run even when a dependency died
	batch       string   // "queue\tbatch": a child of that batch (set by NewBatch, BatchAdd)
	dependents  []string // "queue\tid" of the jobs of the same call that wait on it
	errs        []error
}

// On puts the job on the named queue. Default: "default". Names are 1-64 characters of
// letters, digits, '.', '_' and '-'.
func On(queue string) Option { return func(o *options) { o.queue = queue } }

// ID gives the job an explicit ID instead of a generated one. It doubles as a dedup key:
// enqueuing an ID that already exists in the queue returns ErrDuplicate.
func ID(id string) Option { return func(o *options) { o.id = id } }

// Delay makes the job due d from now (by Redis's clock). Zero means now.
func Delay(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.errs = append(o.errs, invalid("delay %s is negative", d))
		}
		o.delay = d
	}
}

// At makes the job due at t. A time in the past means now.
func At(t time.Time) Option { return func(o *options) { o.at = t } }

// MaxRetry sets how many times a failed job is retried before it is dead: it runs at most
// n+1 times. Zero means no retries; n may be at most [MaxRetryLimit]. Default: 10.
func MaxRetry(n int) Option {
	return func(o *options) {
		if n < 0 {
			o.errs = append(o.errs, invalid("max retry %d is negative", n))
		} else if n > MaxRetryLimit {
			o.errs = append(o.errs, invalid("max retry %d is over the limit of %d", n, MaxRetryLimit))
		}
		o.maxRetry, o.maxRetrySet = n, true
	}
}

// Timeout bounds one attempt: the handler's context is cancelled after d. d must be at
// least [MinTimeout] (1ms); it is kept in whole milliseconds. Default: 30m.
func Timeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, invalid("timeout %s must be positive", d))
		} else if d < MinTimeout {
			o.errs = append(o.errs, invalid("timeout %s is under the 1ms minimum", d))
		}
		o.timeout = d
	}
}

// Unique makes the job unique for ttl: while its unique key lives, enqueuing another job
// with the same key on the same queue returns ErrDuplicate and the first job's ID. The
// key defaults to the job type and a hash of the payload (see UniqueKey). It is released
// when the job finishes (done or dead), or at ttl, whichever comes first; see
// UniqueUntilExpiry.
func Unique(ttl time.Duration) Option {
	return func(o *options) {
		if ttl <= 0 {
			o.errs = append(o.errs, invalid("unique ttl %s must be positive", ttl))
		}
		o.uniqueTTL = ttl
	}
}

// UniqueKey sets the unique key explicitly (with Unique), instead of type + payload hash:
// for example "invoice:42" to allow one invoice job per invoice whatever its payload.
func UniqueKey(key string) Option { return func(o *options) { o.uniqueKey = key } }

// UniqueUntilExpiry keeps a unique job's key for its whole ttl even after the job has
// finished: at most one such job per ttl window ("send this digest at most hourly").
func UniqueUntilExpiry() Option { return func(o *options) { o.uniqueKeep = true } }

// Exclusive makes workers run the job only while holding a lock named key (default: the
// job type), so no two exclusive jobs with the same key run at once anywhere. A worker
// that finds the lock held puts the job back to run a little later, without counting an
// attempt.
func Exclusive(key string) Option {
	return func(o *options) { o.exclusive, o.exclKey = true, key }
}

// LimitKey puts the job under the limit key k (such as "customer:42"): it then obeys the
// queue's per-key limits too (Limit.KeyConcurrency, KeyRate; [Client.SetKeyLimit] for
// one key's own), and waits in its key's own line: keys are served round-robin, so the
// jobs of a key held back by its limits never delay those of another key or jobs without
// a key. At most 200 bytes, no control characters. Without per-key limits set, a keyed
// job is claimed as any other (still round-robin with the other keys).
func LimitKey(k string) Option {
	return func(o *options) {
		if k == "" {
			o.errs = append(o.errs, invalid("limit key is empty"))
		}
		o.limitKey = k
	}
}

// Combine returns one option that applies opts in order: for a helper that gives several
// options as one (see package jobsotel's Inject).
func Combine(opts ...Option) Option {
	return func(o *options) {
		for _, opt := range opts {
			opt(o)
		}
	}
}

// Meta limits: a job carries at most MaxMeta entries; a key is 1-64 printable bytes, a
// value at most 256 bytes, neither with a tab or a newline.
const (
	MaxMeta      = 16
	MaxMetaValue = 256
)

// Meta attaches a small piece of string metadata to the job: a trace context (see package
// jobsotel), a tenant, a request ID. Handlers read it in Job.Meta; `jobs inspect` shows
// it. A key given twice keeps its last value. Each entry is one field of the job's hash
// ("m:" + key): a value of up to 64 bytes keeps the hash in Redis's compact encoding.
func Meta(key, value string) Option {
	return func(o *options) {
		switch {
		case len(key) == 0 || len(key) > 64 || strings.ContainsAny(key, "\t\n"):
			o.errs = append(o.errs, invalid("meta key %q must be 1-64 bytes without tabs or newlines", key))
			return
		case len(value) > MaxMetaValue || strings.ContainsAny(value, "\t\n"):
			o.errs = append(o.errs, invalid("meta %q: value must be at most %d bytes without tabs or newlines", key, MaxMetaValue))
			return
		}
		if err := printable("meta key", key); err != nil {
			o.errs = append(o.errs, err)
			return
		}
		if !utf8.ValidString(value) {
			o.errs = append(o.errs, invalid("meta %q: value is not valid UTF-8", key))
			return
		}
		for i := 0; i < len(o.meta); i += 2 {
			if o.meta[i] == key {
				o.meta[i+1] = value
				return
			}
		}
		if len(o.meta)/2 == MaxMeta {
			o.errs = append(o.errs, invalid("more than %d meta entries", MaxMeta))
			return
		}
		o.meta = append(o.meta, key, value)
	}
}

func resolve(opts []Option) (options, error) {
	o := options{queue: DefaultQueue, maxRetry: DefaultMaxRetry, timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.errs) > 0 {
		return o, o.errs[0]
	}
	if o.delay > 0 && !o.at.IsZero() {
		return o, invalid("Delay and At both given: choose one")
	}
	if len(o.after) > 0 && (o.delay > 0 || !o.at.IsZero()) {
		return o, invalid("After and Delay or At both given: a job with dependencies runs when they end")
	}
	if o.depRun && len(o.after) == 0 {
		return o, invalid("IgnoreDependencyFailure needs After or AfterJob")
	}
	for i := range o.after {
		if o.after[i].Queue == "" {
			o.after[i].Queue = o.queue
		}
		if err := o.after[i].validate(); err != nil {
			return o, err
		}
	}
	if err := ValidateQueue(o.queue); err != nil {
		return o, err
	}
	if o.id != "" {
		if err := validateID(o.id); err != nil {
			return o, err
		}
		self := JobRef{Queue: o.queue, ID: o.id}
		if slices.Contains(o.after, self) {
			return o, invalid("dependency cycle %s -> %s: a job cannot wait on itself", self, self)
		}
	}
	if o.uniqueTTL == 0 && (o.uniqueKey != "" || o.uniqueKeep) {
		return o, invalid("UniqueKey and UniqueUntilExpiry need Unique(ttl)")
	}
	if err := validateKey("unique key", o.uniqueKey); err != nil {
		return o, err
	}
	if err := validateKey("exclusive key", o.exclKey); err != nil {
		return o, err
	}
	if err := validateKey("limit key", o.limitKey); err != nil {
		return o, err
	}
	return o, nil
}

// validateKey checks a unique, exclusive or limit key ("" = none given).
func validateKey(what, k string) error {
	if len(k) > 200 {
		return invalid("%s is %d bytes, the limit is 200", what, len(k))
	}
	if k != "" {
		return printable(what, k)
	}
	return nil
}

// ValidateQueue reports whether name is usable as a queue name.
func ValidateQueue(name string) error {
	if name == "" || len(name) > 64 {
		return invalid("queue name %q must be 1-64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == '-') {
			return invalid("queue name %q: only letters, digits, '.', '_' and '-' are allowed", name)
		}
	}
	return nil
}

func validateID(id string) error {
	if len(id) > 128 {
		return invalid("job ID %.20q... is %d bytes, the limit is 128", id, len(id))
	}
	return printable("job ID", id)
}

// ValidateType reports whether typ is usable as a job type: 1-128 bytes of printable
// UTF-8, no whitespace.
func ValidateType(typ string) error {
	if typ == "" || len(typ) > 128 {
		return invalid("job type %q must be 1-128 characters", typ)
	}
	return printable("job type", typ)
}

// printable rejects whitespace and control characters, which would make the value
// ambiguous in redis-cli output, logs and `jobs ls` tables.
func printable(what, s string) error {
	if !utf8.ValidString(s) {
		// JSON (jobs ls --json, the dashboard) would print it with U+FFFD in place of the
		// bad bytes: a name no one could give back to find the job.
		return invalid("%s %q is not valid UTF-8", what, s)
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return invalid("%s %q: no spaces or control characters allowed", what, s)
		}
	}
	return nil
}

// ms converts a duration to the milliseconds the scripts take: the one place Go time
// becomes script time.
func ms(d time.Duration) int64 { return d.Milliseconds() }
