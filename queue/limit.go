package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobs-dev/jobs/scripts"
)

// Flow control: a queue's limits, kept in Redis (jobs:{q}:limit) so that every worker
// obeys the same ones and an operator changes them live. The claim scripts check and take
// them atomically with the claim (see limit_room in scripts/lib.lua).

// Limit is a queue's limits. A zero field is no limit of that kind.
//
//   - Concurrency: at most this many of the queue's jobs hold an unexpired lease at once,
//     across all workers. Jobs a worker claimed ahead hold a lease, so they count. A dead
//     worker's slots come back when its leases expire (Config.Lease, 30s by default).
//   - Rate per Period, with Burst: job starts (claims, retries included) follow GCRA, a
//     token bucket of Burst tokens refilled one per Period/Rate: at most Rate+Burst-1
//     starts in any window of one Period, evenly spaced at the full rate. Burst 0 is 1 (no
//     burst: at most Rate in any Period). A job claimed and then handed back unrun (a
//     stopping worker, a job claimed ahead that waited too long) has spent its token.
type Limit struct {
	Concurrency int
	Rate        int
	Period      time.Duration
	Burst       int
}

// Bounds of a Limit's fields.
const (
	MaxLimit    = 1_000_000_000 // Concurrency, Rate and Burst
	MaxPeriod   = 366 * 24 * time.Hour
	minTokenGap = time.Microsecond // Period/Rate: the rate's clock counts microseconds
)

// LimitKind names one kind of limit, for [Client.RemoveLimit].
type LimitKind string

// The kinds of limit.
const (
	ConcurrencyLimit LimitKind = "concurrency"
	RateLimit        LimitKind = "rate"
)

// String writes l as `jobs limit ls` shows it: "concurrency 5, rate 20/1s burst 1".
func (l Limit) String() string {
	var parts []string
	if l.Concurrency > 0 {
		parts = append(parts, "concurrency "+strconv.Itoa(l.Concurrency))
	}
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("rate %d/%s burst %d", l.Rate, l.Period, max(l.Burst, 1)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// check reports the first field of l out of bounds (ErrInvalid, naming it). A Limit with
// no field set is refused: [Client.RemoveLimit] removes limits.
func (l Limit) check() error {
	switch {
	case l.Concurrency < 0 || l.Concurrency > MaxLimit:
		return invalid("concurrency %d must be 1-%d", l.Concurrency, MaxLimit)
	case l.Rate < 0 || l.Rate > MaxLimit:
		return invalid("rate %d must be 1-%d", l.Rate, MaxLimit)
	case l.Burst < 0 || l.Burst > MaxLimit:
		return invalid("burst %d must be 1-%d", l.Burst, MaxLimit)
	case l.Rate == 0 && (l.Period != 0 || l.Burst != 0):
		return invalid("a period or burst needs a rate")
	case l.Rate > 0 && (l.Period < time.Millisecond || l.Period > MaxPeriod):
		return invalid("rate period %s must be 1ms-%s", l.Period, MaxPeriod)
	case l.Rate > 0 && l.Period%time.Millisecond != 0:
		return invalid("rate period %s must be whole milliseconds", l.Period)
	case l.Rate > 0 && l.Period/time.Duration(l.Rate) < minTokenGap:
		return invalid("rate %d per %s is over one job per microsecond", l.Rate, l.Period)
	case l.Concurrency == 0 && l.Rate == 0:
		return invalid("no limit given (set a concurrency or a rate; RemoveLimit removes them)")
	}
	return nil
}

// ParseRate parses a rate as `jobs limit set --rate` takes it: "N/PERIOD", where PERIOD is
// a Go duration ("500ms", "10s", "1m") or a unit alone ("ms", "s", "m", "h": one of it):
// "20/s", "1000/1m", "5/500ms".
func ParseRate(s string) (n int, period time.Duration, err error) {
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, invalid("rate %q: want N/PERIOD, such as 20/s or 100/1m", s)
	}
	n, err = strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n <= 0 {
		return 0, 0, invalid("rate %q: the count %q must be a positive integer", s, num)
	}
	per = strings.TrimSpace(per)
	if per != "" && (per[0] < '0' || per[0] > '9') && per[0] != '.' {
		per = "1" + per
	}
	period, err = time.ParseDuration(per)
	if err != nil || period <= 0 {
		return 0, 0, invalid("rate %q: the period %q must be a positive duration such as s, 10s or 500ms", s, per)
	}
	return n, period, nil
}

// SetLimit sets the queue's limits that l names (its non-zero fields), keeping the others;
// workers apply them at their next claim, and those waiting on the old limits claim at
// once. A rate whose rate, period or burst changes starts afresh, with a full burst. A
// Limit with no field set, or one out of bounds, is refused with ErrInvalid.
func (c *Client) SetLimit(ctx context.Context, queue string, l Limit) error {
	if err := ValidateQueue(queue); err != nil {
		return err
	}
	if err := l.check(); err != nil {
		return fmt.Errorf("limit %s: %w", queue, err)
	}
	conc, rate, period, burst := "", "", "", ""
	if l.Concurrency > 0 {
		conc = strconv.Itoa(l.Concurrency)
	}
	if l.Rate > 0 {
		rate, period, burst = strconv.Itoa(l.Rate), strconv.FormatInt(ms(l.Period), 10), strconv.Itoa(max(l.Burst, 1))
	}
	if err := c.limit(ctx, queue, conc, rate, period, burst); err != nil {
		return err
	}
	// Listed among the queues (`jobs limit ls`, `jobs stats`) before its first job.
	if err := c.rdb.SAdd(ctx, c.keys.queues(), queue).Err(); err != nil {
		return fmt.Errorf("limit %s: %w", queue, err)
	}
	return nil
}

// RemoveLimit removes the queue's limits of the kinds given, or all of them when none is
// given. Removing a limit the queue does not have changes nothing.
func (c *Client) RemoveLimit(ctx context.Context, queue string, kinds ...LimitKind) error {
	if err := ValidateQueue(queue); err != nil {
		return err
	}
	conc, rate := "0", "0"
	if len(kinds) > 0 {
		conc, rate = "", ""
	}
	for _, k := range kinds {
		switch k {
		case ConcurrencyLimit:
			conc = "0"
		case RateLimit:
			rate = "0"
		default:
			return fmt.Errorf("remove limit %s: %w", queue, invalid("limit kind %q: want concurrency or rate", k))
		}
	}
	return c.limit(ctx, queue, conc, rate, "", "")
}

// limit runs limit.lua: the change, its event and the notice to waiting workers in one step.
func (c *Client) limit(ctx context.Context, queue, conc, rate, period, burst string) error {
	qk := c.keys.queue(queue)
	err := c.run(ctx, scripts.Limit, []string{qk.limit, qk.events},
		conc, rate, period, burst, c.keys.cancelChannel(), queue, c.eventsMax()).Err()
	if err != nil {
		return fmt.Errorf("limit %s: %w", queue, err)
	}
	return nil
}

// LimitStatus is a queue's limits and where it stands against them, read at At (Redis's
// clock). JSON field names are the `jobs limit ls --json` contract.
type LimitStatus struct {
	Queue string
	Limit
	// Running counts the queue's unexpired leases: what the concurrency limit counts
	// (running jobs, and jobs claimed ahead not started yet).
	Running int
	// NextSlot, while Running has reached the concurrency limit, is the earliest lease
	// deadline: when a slot frees at the latest (a job ending frees one sooner). Zero
	// otherwise.
	NextSlot time.Time
	// NextToken, while the rate's tokens are spent, is when the next one is due. Zero when
	// a start is allowed now.
	NextToken time.Time
	At        time.Time
}

// Waiting says which limit holds the queue's ready jobs back now ("" when none):
// ConcurrencyLimit while Running has reached it, else RateLimit while no token is left.
func (s LimitStatus) Waiting() LimitKind {
	switch {
	case s.Concurrency > 0 && s.Running >= s.Concurrency:
		return ConcurrencyLimit
	case !s.NextToken.IsZero():
		return RateLimit
	}
	return ""
}

// Until is when the limit that holds the queue back (Waiting) lets the next job start at
// the latest; zero when none does.
func (s LimitStatus) Until() time.Time {
	switch s.Waiting() {
	case ConcurrencyLimit:
		if !s.NextToken.IsZero() && s.NextToken.After(s.NextSlot) {
			return s.NextToken
		}
		return s.NextSlot
	case RateLimit:
		return s.NextToken
	}
	return time.Time{}
}

// Limits returns the limits of the queues that have any, sorted by queue name, each with
// its running count and next free slot or token. With queue names given, it reads those
// only, and returns an entry for each, limited or not.
func (c *Client) Limits(ctx context.Context, queues ...string) ([]LimitStatus, error) {
	all := len(queues) == 0
	if all {
		var err error
		if queues, err = c.Queues(ctx); err != nil {
			return nil, err
		}
	}
	for _, q := range queues {
		if err := ValidateQueue(q); err != nil {
			return nil, err
		}
	}
	calls := make([]*scriptCall, len(queues))
	for i, q := range queues {
		qk := c.keys.queue(q)
		calls[i] = &scriptCall{script: scripts.Limits, keys: []string{qk.limit, qk.active}}
	}
	if len(calls) == 0 {
		return nil, nil
	}
	c.runScripts(ctx, nil, calls)
	out := make([]LimitStatus, 0, len(queues))
	for i, call := range calls {
		v, err := call.cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("limits of %s: %w", queues[i], err)
		}
		s, ok := decodeLimitStatus(queues[i], v)
		if !ok {
			return nil, fmt.Errorf("limits of %s: %w", queues[i], errBadReply)
		}
		if all && s.Concurrency == 0 && s.Rate == 0 {
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// decodeLimitStatus decodes limits.lua's reply: {now_ms, concurrency, rate, period_ms,
// burst, tat_us, running, first_deadline_ms}.
func decodeLimitStatus(queue string, v []any) (LimitStatus, bool) {
	if len(v) != 8 {
		return LimitStatus{}, false
	}
	var n [8]int64
	for i, x := range v {
		switch x := x.(type) {
		case int64:
			n[i] = x
		case string: // tat: an integer of microseconds, as a string
			f, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return LimitStatus{}, false
			}
			n[i] = f
		default:
			return LimitStatus{}, false
		}
	}
	s := LimitStatus{Queue: queue, At: time.UnixMilli(n[0]), Running: int(n[6]),
		Limit: Limit{Concurrency: int(n[1]), Rate: int(n[2]), Period: time.Duration(n[3]) * time.Millisecond, Burst: int(n[4])}}
	if s.Concurrency > 0 && s.Running >= s.Concurrency && n[7] > 0 {
		s.NextSlot = time.UnixMilli(n[7] + 1) // a lease is expired once Redis's time passes its deadline
	}
	if s.Rate > 0 {
		// As limit_room in lib.lua: a token is due once tat - (burst-1)*tau <= now.
		tau := (n[3]*1000 + n[2] - 1) / n[2]
		due := n[5] - int64(max(s.Burst, 1)-1)*tau
		if due > n[0]*1000 {
			s.NextToken = time.UnixMicro(due)
		}
	}
	return s, true
}
