package cron

import (
	"fmt"
	"strings"
	"time"

	"github.com/jobs-dev/jobs/internal/shellwords"
	"github.com/jobs-dev/jobs/queue"
)

// Entry is one cron entry: on each tick of Spec, one job of Type with Payload is enqueued
// on Queue (exactly once, however many schedulers run).
type Entry struct {
	// Name identifies the entry; ticks are deduplicated by (Name, tick).
	Name string `json:"name"`
	// Spec is when it fires: six fields with seconds ("0 30 3 * * *"), five without
	// (seconds = 0), or a descriptor (@every 5s, @hourly, @daily, ...), optionally
	// prefixed with CRON_TZ=Area/City (without it, UTC on every host). @every ticks are
	// aligned to multiples of the interval, so every scheduler computes the same ticks. A spec that never fires
	// (February 30) is refused. The package doc says how ticks fall on daylight-saving
	// changes.
	Spec    string `json:"spec"`
	Type    string `json:"type"`
	Payload string `json:"payload,omitempty"`
	// Queue defaults to "default".
	Queue string `json:"queue,omitempty"`
	// MaxRetry of the enqueued jobs; nil means queue.DefaultMaxRetry.
	MaxRetry *int `json:"max_retry,omitempty"`
	// Timeout of the enqueued jobs; zero means queue.DefaultTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Exclusive: never two of the entry's jobs at once. A tick while the entry's last job
	// is still pending or running (retries included) is skipped, as Kubernetes' CronJob
	// concurrencyPolicy Forbid does, rather than queued behind it: a job that overran its
	// interval would build an unbounded backlog. The jobs hold the unique key
	// "cron:<name>" until they end (at most ExclusiveHold) and run under an exclusive
	// lock of the same name.
	Exclusive bool `json:"exclusive,omitempty"`
	// CatchUp fires the latest tick missed while no scheduler ran, once, on start.
	// Default: missed ticks are skipped.
	CatchUp bool `json:"catch_up,omitempty"`
}

// Next returns the entry's first tick after t, or the zero time when its spec is invalid
// or never fires. See the package doc for how ticks fall on daylight-saving changes.
func (e Entry) Next(t time.Time) time.Time {
	s, err := parseSchedule(e.Spec)
	if err != nil {
		return time.Time{}
	}
	return s.Next(t)
}

// Validate checks the entry's own fields and parses the spec; a spec that never fires is
// an error. Its errors wrap ErrInvalid. The job it enqueues (type, payload size, queue, options) is checked against a
// queue.Client by [Store.Add] and [New], with the checks Enqueue makes.
func (e Entry) Validate() error {
	if e.Name == "" || len(e.Name) > 100 || strings.ContainsFunc(e.Name, func(r rune) bool { return r <= ' ' || r == 0x7f || r == ':' }) {
		return fmt.Errorf("%w: name %q: 1-100 characters, no spaces, control characters or ':'", ErrInvalid, e.Name)
	}
	if _, err := parseSchedule(e.Spec); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalid, e.Name, err)
	}
	if _, err := e.options(time.Time{}); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalid, e.Name, err)
	}
	if e.Type == "" || strings.ContainsAny(e.Type, " \t\r\n") {
		return fmt.Errorf("%w %s: job type %q must be non-empty, without spaces", ErrInvalid, e.Name, e.Type)
	}
	return nil
}

// check validates e and the job it enqueues as c's Enqueue would, so that an entry is
// refused when added rather than failing at every tick.
func (e Entry) check(c *queue.Client) error {
	if err := e.Validate(); err != nil {
		return err
	}
	opts, err := e.options(time.Now())
	if err == nil {
		err = c.Check(queue.BatchJob{Type: e.Type, Payload: []byte(e.Payload), Options: opts})
	}
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalid, e.Name, err)
	}
	return nil
}

// options are the enqueue options of the job for one tick: its ID is derived from the
// entry and the tick, so a second enqueue of the same tick is a duplicate.
func (e Entry) options(tick time.Time) ([]queue.Option, error) {
	q := e.Queue
	if q == "" {
		q = queue.DefaultQueue
	}
	if err := queue.ValidateQueue(q); err != nil {
		return nil, err
	}
	opts := []queue.Option{queue.On(q), queue.ID(JobID(e.Name, tick))}
	if e.MaxRetry != nil {
		if *e.MaxRetry < 0 {
			return nil, fmt.Errorf("max retry %d is negative", *e.MaxRetry)
		}
		if *e.MaxRetry > queue.MaxRetryLimit {
			return nil, fmt.Errorf("max retry %d is over the limit of %d", *e.MaxRetry, queue.MaxRetryLimit)
		}
		opts = append(opts, queue.MaxRetry(*e.MaxRetry))
	}
	if e.Timeout < 0 {
		return nil, fmt.Errorf("timeout %s is negative", e.Timeout)
	}
	if e.Timeout > 0 && e.Timeout < queue.MinTimeout {
		// Stored in whole ms, it would read back as 0: the 30 min default.
		return nil, fmt.Errorf("timeout %s is under the 1ms minimum", e.Timeout)
	}
	if e.Timeout > 0 {
		opts = append(opts, queue.Timeout(e.Timeout))
	}
	if e.Exclusive {
		key := "cron:" + e.Name
		opts = append(opts, queue.Exclusive(key), queue.Unique(ExclusiveHold), queue.UniqueKey(key))
	}
	return opts, nil
}

// ExclusiveHold bounds how long an exclusive entry's job holds back its later ticks: its
// unique key is released when it ends, or after this long if it never does (its hash
// lost with a Redis that lost data, say).
const ExclusiveHold = 24 * time.Hour

// JobID is the ID of the job entry name enqueues for tick.
func JobID(name string, tick time.Time) string {
	return fmt.Sprintf("cron:%s:%d", name, tick.Unix())
}

// ParseEntry reads the `--cron` form "NAME SPEC TYPE [PAYLOAD]", split like a shell
// command line: quote SPEC when it has spaces, e.g. `nightly '0 0 3 * * *' report`. Its
// errors wrap ErrInvalid.
func ParseEntry(s string) (Entry, error) {
	words, err := shellwords.Split(s)
	if err != nil {
		return Entry{}, fmt.Errorf("%w %q: %w", ErrInvalid, s, err)
	}
	if len(words) < 3 || len(words) > 4 {
		return Entry{}, fmt.Errorf("%w %q: want NAME SPEC TYPE [PAYLOAD], with SPEC quoted when it has spaces ('*/5 * * * * *')", ErrInvalid, s)
	}
	e := Entry{Name: words[0], Spec: words[1], Type: words[2]}
	if len(words) == 4 {
		e.Payload = words[3]
	}
	return e, e.Validate()
}
