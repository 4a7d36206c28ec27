package queue

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobs-dev/jobs/scripts"
)

// Flow control: a queue's limits, kept in Redis (jobs:{q}:limit) so that every worker
// obeys the same ones and an operator changes them live. The claim scripts check and take
// them atomically with the claim (see limit_room in scripts/lib).

// Limit is a queue's limits. A zero field is no limit of that kind.
//
//   - Concurrency: at most this many of the queue's jobs hold an unexpired lease at once,
//     across all workers. Jobs a worker claimed ahead hold a lease, so they count. A dead
//     worker's slots come back when its leases expire (Config.Lease, 30s by default).
//   - Rate per Period, with Burst: job starts (claims, retries included) follow GCRA, a
//     token bucket of Burst tokens refilled one per Period/Rate: at most Rate+Burst-1
//     starts in any window of one Period, evenly spaced at the full rate. Burst 0 is 1 (no
//     burst: at most Rate in any Period). A job claimed and then handed back unrun (a
//     stopping worker, a job claimed ahead that waited too long) has spent its token. A
//     claim may take the tokens due within 20ms: such a job's start (Job.StartedAt) is
//     its token's instant, and the worker starts its handler then, so a binding rate is
//     delivered in full.
//   - KeyConcurrency, KeyRate per KeyPeriod with KeyBurst: the same, for the jobs of each
//     limit key (see [LimitKey]) on its own: the default of every key of the queue;
//     [Client.SetKeyLimit] gives some keys their own. A key's concurrency counts its
//     unexpired leases (jobs:{q}:kactive:K, kept while some key's concurrency is below
//     the queue's), as the queue's. Keys are served round-robin, up to q jobs a key a
//     turn when more keys are due than a claim takes jobs (q is 4 up to 256 keys with
//     jobs ready, then grows with them up to 16 from 961 keys): a key held back by its
//     limits holds back no other key and no job without a key.
type Limit struct {
	Concurrency int
	Rate        int
	Period      time.Duration
	Burst       int

	KeyConcurrency int
	KeyRate        int
	KeyPeriod      time.Duration
	KeyBurst       int
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
	// KeyLimit is every per-key limit: the default of every key and the keys' own.
	KeyLimit LimitKind = "key"
	// KeyWait is what a queue waits on when every key with jobs waits on its own limits
	// (LimitStatus.Waiting); it names no limit to remove.
	KeyWait LimitKind = "keys"
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
	if l.KeyConcurrency > 0 {
		parts = append(parts, "key concurrency "+strconv.Itoa(l.KeyConcurrency))
	}
	if l.KeyRate > 0 {
		parts = append(parts, fmt.Sprintf("key rate %d/%s burst %d", l.KeyRate, l.KeyPeriod, max(l.KeyBurst, 1)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// check reports the first field of l out of bounds (ErrInvalid, naming it). A Limit with
// no field set is refused: [Client.RemoveLimit] removes limits.
func (l Limit) check() error {
	if err := checkOne("", l.Concurrency, l.Rate, l.Period, l.Burst); err != nil {
		return err
	}
	if err := checkOne("key ", l.KeyConcurrency, l.KeyRate, l.KeyPeriod, l.KeyBurst); err != nil {
		return err
	}
	if l.Concurrency == 0 && l.Rate == 0 && l.KeyConcurrency == 0 && l.KeyRate == 0 {
		return invalid("no limit given (set a concurrency or a rate; RemoveLimit removes them)")
	}
	return nil
}

// checkOne checks one concurrency and rate (the queue's, or with what = "key " a key's).
func checkOne(what string, conc, rate int, period time.Duration, burst int) error {
	l := Limit{Concurrency: conc, Rate: rate, Period: period, Burst: burst}
	switch {
	case l.Concurrency < 0 || l.Concurrency > MaxLimit:
		return invalid("%sconcurrency %d must be 1-%d", what, l.Concurrency, MaxLimit)
	case l.Rate < 0 || l.Rate > MaxLimit:
		return invalid("%srate %d must be 1-%d", what, l.Rate, MaxLimit)
	case l.Burst < 0 || l.Burst > MaxLimit:
		return invalid("%sburst %d must be 1-%d", what, l.Burst, MaxLimit)
	case l.Rate == 0 && (l.Period != 0 || l.Burst != 0):
		return invalid("a %speriod or burst needs a %srate", what, what)
	case l.Rate > 0 && (l.Period < time.Millisecond || l.Period > MaxPeriod):
		return invalid("%srate period %s must be 1ms-%s", what, l.Period, MaxPeriod)
	case l.Rate > 0 && l.Period%time.Millisecond != 0:
		return invalid("%srate period %s must be whole milliseconds", what, l.Period)
	case l.Rate > 0 && l.Period/time.Duration(l.Rate) < minTokenGap:
		return invalid("%srate %d per %s is over one job per microsecond", what, l.Rate, l.Period)
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
// once. A rate whose rate, period or burst changes starts afresh, with a full burst (a
// key's: from its next token). l's Key fields are the default of every limit key. A
// Limit with no field set, or one out of bounds, is refused with ErrInvalid.
func (c *Client) SetLimit(ctx context.Context, queue string, l Limit) error {
	return c.setLimit(ctx, queue, l, nil)
}

// SetKeyLimit gives each of the limit keys its own limits, l's Key fields (the others
// must be zero), set as SetLimit sets them: in place of the queue's default for keys
// (Limit.KeyConcurrency...), for those keys only. Up to 1,000 keys per call.
func (c *Client) SetKeyLimit(ctx context.Context, queue string, l Limit, keys ...string) error {
	if len(keys) == 0 || len(keys) > 1000 {
		return fmt.Errorf("limit %s: %w", queue, invalid("%d limit keys: give 1-1000", len(keys)))
	}
	if l.Concurrency != 0 || l.Rate != 0 || l.Period != 0 || l.Burst != 0 {
		return fmt.Errorf("limit %s: %w", queue, invalid("a key's own limits are its key concurrency and key rate only"))
	}
	for _, k := range keys {
		if err := validateKey("limit key", k); err != nil || k == "" {
			return fmt.Errorf("limit %s: %w", queue, cmp.Or(err, invalid("limit key is empty")))
		}
	}
	return c.setLimit(ctx, queue, l, keys)
}

func (c *Client) setLimit(ctx context.Context, queue string, l Limit, keys []string) error {
	if err := ValidateQueue(queue); err != nil {
		return err
	}
	if err := l.check(); err != nil {
		return fmt.Errorf("limit %s: %w", queue, err)
	}
	a := limitArgs{}
	a.conc, a.rate, a.period, a.burst = limitFields(l.Concurrency, l.Rate, l.Period, l.Burst)
	a.kconc, a.krate, a.kperiod, a.kburst = limitFields(l.KeyConcurrency, l.KeyRate, l.KeyPeriod, l.KeyBurst)
	a.keys = keys
	if err := c.limit(ctx, queue, a); err != nil {
		return err
	}
	// Listed among the queues (`jobs limit ls`, `jobs stats`) before its first job.
	if err := c.rdb.SAdd(ctx, c.keys.queues(), queue).Err(); err != nil {
		return fmt.Errorf("limit %s: %w", queue, err)
	}
	return nil
}

// limitFields is one concurrency and rate as limit.lua takes them: "" unchanged.
func limitFields(conc, rate int, period time.Duration, burst int) (c, r, p, b string) {
	if conc > 0 {
		c = strconv.Itoa(conc)
	}
	if rate > 0 {
		r, p, b = strconv.Itoa(rate), strconv.FormatInt(ms(period), 10), strconv.Itoa(max(burst, 1))
	}
	return c, r, p, b
}

// RemoveLimit removes the queue's limits of the kinds given, or all of them when none is
// given (KeyLimit: every per-key limit, the default and the keys' own). Removing a limit
// the queue does not have changes nothing.
func (c *Client) RemoveLimit(ctx context.Context, queue string, kinds ...LimitKind) error {
	if err := ValidateQueue(queue); err != nil {
		return err
	}
	a := limitArgs{conc: "0", rate: "0", kconc: "*"}
	if len(kinds) > 0 {
		a = limitArgs{}
	}
	for _, k := range kinds {
		switch k {
		case ConcurrencyLimit:
			a.conc = "0"
		case RateLimit:
			a.rate = "0"
		case KeyLimit:
			a.kconc = "*"
		default:
			return fmt.Errorf("remove limit %s: %w", queue, invalid("limit kind %q: want concurrency, rate or key", k))
		}
	}
	return c.limit(ctx, queue, a)
}

// RemoveKeyLimit removes the own limits of the keys given: they obey the queue's default
// for keys again.
func (c *Client) RemoveKeyLimit(ctx context.Context, queue string, keys ...string) error {
	if err := ValidateQueue(queue); err != nil {
		return err
	}
	if len(keys) == 0 || len(keys) > 1000 {
		return fmt.Errorf("remove limit %s: %w", queue, invalid("%d limit keys: give 1-1000", len(keys)))
	}
	return c.limit(ctx, queue, limitArgs{kconc: "0", krate: "0", keys: keys})
}

// limitArgs are limit.lua's arguments: "" leaves a field as it is, "0" removes it.
type limitArgs struct {
	conc, rate, period, burst     string
	kconc, krate, kperiod, kburst string
	keys                          []string
}

// limit runs limit.lua: the change, its event and the notice to waiting workers in one step.
func (c *Client) limit(ctx context.Context, queue string, a limitArgs) error {
	qk := c.keys.queue(queue)
	args := []any{a.conc, a.rate, a.period, a.burst, c.keys.cancelChannel(), queue, c.eventsMax(),
		a.kconc, a.krate, a.kperiod, a.kburst}
	for _, k := range a.keys {
		args = append(args, k)
	}
	return sent(ctx, "limit "+queue, func() error {
		return c.run(ctx, scripts.Limit, []string{qk.limit, qk.events, qk.active}, args...).Err()
	})
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
	// KeysWaiting counts the limit keys with jobs ready, and Keys reports some keys: those
	// with their own limits (at most 100), then the first 20 the claims will serve.
	KeysWaiting int
	Keys        []KeyStatus
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
		if all && s.Concurrency == 0 && s.Rate == 0 && s.KeyConcurrency == 0 && s.KeyRate == 0 && len(s.Keys) == 0 {
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// decodeLimitStatus decodes limits.lua's reply: {now_ms, concurrency, rate, period_ms,
// burst, tat_us, running, first_deadline_ms, key_default, keys_waiting, key...}.
func decodeLimitStatus(queue string, v []any) (LimitStatus, bool) {
	if len(v) < 10 {
		return LimitStatus{}, false
	}
	n, ok := replyInts(v[:8])
	if !ok {
		return LimitStatus{}, false
	}
	s := LimitStatus{Queue: queue, At: time.UnixMilli(n[0]), Running: int(n[6]),
		Limit: Limit{Concurrency: int(n[1]), Rate: int(n[2]), Period: time.Duration(n[3]) * time.Millisecond, Burst: int(n[4])}}
	s.NextSlot = nextSlot(s.Concurrency, s.Running, n[7])
	s.NextToken = nextToken(n[0], s.Rate, n[3], s.Burst, n[5])
	def, _ := v[8].(string)
	if ks, ok := parseKeySpec(def); ok {
		s.KeyConcurrency, s.KeyRate, s.KeyPeriod, s.KeyBurst = ks.Concurrency, ks.Rate, ks.Period, ks.Burst
	}
	w, ok := v[9].(int64)
	if !ok {
		return LimitStatus{}, false
	}
	s.KeysWaiting = int(w)
	for _, x := range v[10:] {
		k, ok := decodeKeyStatus(s, x)
		if !ok {
			return LimitStatus{}, false
		}
		s.Keys = append(s.Keys, k)
	}
	return s, true
}

// replyInts reads a script's integers, some of them sent as strings (a tat: microseconds).
func replyInts(v []any) ([]int64, bool) {
	n := make([]int64, len(v))
	for i, x := range v {
		switch x := x.(type) {
		case int64:
			n[i] = x
		case string:
			f, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return nil, false
			}
			n[i] = f
		default:
			return nil, false
		}
	}
	return n, true
}

// nextSlot is when a slot frees at the latest, while running has reached conc: just
// after the earliest lease deadline first_ms (a lease is expired once Redis's time passes
// its deadline). Zero otherwise.
func nextSlot(conc, running int, firstMs int64) time.Time {
	if conc > 0 && running >= conc && firstMs > 0 {
		return time.UnixMilli(firstMs + 1)
	}
	return time.Time{}
}

// nextToken is when a rate's next token is due, zero when one is left now (ms): as
// limit_room in scripts/lib, a token is due once tat - (burst-1)*tau <= now.
func nextToken(nowMs int64, rate int, periodMs int64, burst int, tatUs int64) time.Time {
	if rate <= 0 {
		return time.Time{}
	}
	tau := (periodMs*1000 + int64(rate) - 1) / int64(rate)
	due := tatUs - int64(max(burst, 1)-1)*tau
	if due > nowMs*1000 {
		return time.UnixMicro(due)
	}
	return time.Time{}
}
