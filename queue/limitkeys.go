package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobs-dev/jobs/scripts"
)

// Per-key limits: what `jobs limit ls` shows of a queue's limit keys (see [LimitKey]).

// KeyStatus is one limit key of a queue and where it stands against its limits.
type KeyStatus struct {
	Key string
	// Own says the key has its own limits ([Client.SetKeyLimit]); else Limit is the
	// queue's default for keys (its Key fields; the others are zero here).
	Own bool
	Limit
	// Running counts the key's unexpired leases, what its concurrency counts.
	Running int
	// Ready says jobs of the key wait to run; Due is then when the claims may serve the
	// key next (the ring's order: the earliest due is served first). A key held back by
	// its concurrency is due at its earliest lease deadline at the latest (one of its jobs
	// ending brings it forward); one held back by its rate, at its next token.
	Ready bool
	Due   time.Time
	// NextSlot and NextToken are as LimitStatus's, for the key's limits.
	NextSlot  time.Time
	NextToken time.Time
}

// keySpec is a key's limits as limit.lua stores them: "concurrency rate period_ms burst".
type keySpec struct {
	Concurrency, Rate int
	Period            time.Duration
	Burst             int
}

// parseKeySpec reads a key's limits as stored; false for "" or a malformed value.
func parseKeySpec(s string) (keySpec, bool) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return keySpec{}, false
	}
	var n [4]int
	for i, x := range f {
		v, err := strconv.Atoi(x)
		if err != nil || v < 0 {
			return keySpec{}, false
		}
		n[i] = v
	}
	return keySpec{Concurrency: n[0], Rate: n[1], Period: time.Duration(n[2]) * time.Millisecond, Burst: n[3]}, true
}

// decodeKeyStatus decodes one key of limits.lua's reply: {K, own_limits, running,
// first_deadline_ms, tat_us, due_us}; q holds the queue's default for keys.
func decodeKeyStatus(q LimitStatus, x any) (KeyStatus, bool) {
	a, ok := x.([]any)
	if !ok || len(a) != 6 {
		return KeyStatus{}, false
	}
	key, ok1 := a[0].(string)
	own, ok2 := a[1].(string)
	n, ok3 := replyInts(a[2:])
	if !ok1 || !ok2 || !ok3 {
		return KeyStatus{}, false
	}
	k := KeyStatus{Key: key, Running: int(n[0])}
	spec := keySpec{Concurrency: q.KeyConcurrency, Rate: q.KeyRate, Period: q.KeyPeriod, Burst: q.KeyBurst}
	if s, ok := parseKeySpec(own); ok {
		spec, k.Own = s, true
	}
	k.KeyConcurrency, k.KeyRate, k.KeyPeriod, k.KeyBurst = spec.Concurrency, spec.Rate, spec.Period, spec.Burst
	nowMs := q.At.UnixMilli()
	k.NextSlot = nextSlot(spec.Concurrency, k.Running, n[1])
	k.NextToken = nextToken(nowMs, spec.Rate, spec.Period.Milliseconds(), spec.Burst, n[2])
	if n[3] >= 0 {
		k.Ready, k.Due = true, time.UnixMicro(max(n[3], nowMs*1000))
	}
	return k, true
}

// KeyLimits is Limits for one queue, with the limit keys given reported among its Keys
// (limited or not, waiting or not).
func (c *Client) KeyLimits(ctx context.Context, queue string, keys ...string) (LimitStatus, error) {
	if err := ValidateQueue(queue); err != nil {
		return LimitStatus{}, err
	}
	qk := c.keys.queue(queue)
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	v, err := c.run(ctx, scripts.Limits, []string{qk.limit, qk.active}, args...).Slice()
	if err != nil {
		return LimitStatus{}, fmt.Errorf("limits of %s: %w", queue, err)
	}
	s, ok := decodeLimitStatus(queue, v)
	if !ok {
		return LimitStatus{}, fmt.Errorf("limits of %s: %w", queue, errBadReply)
	}
	return s, nil
}

// Waiting says which of its limits holds the key's ready jobs back now ("" when none):
// "key concurrency" while Running has reached it, "key rate" while no token is left, or
// "key pause" while a handler's pause (worker.PauseKey) lasts. Until is then when the
// claims serve the key next at the latest.
func (k KeyStatus) Waiting(at time.Time) (why string, until time.Time) {
	if !k.Ready || !k.Due.After(at) {
		return "", time.Time{}
	}
	switch {
	case k.KeyConcurrency > 0 && k.Running >= k.KeyConcurrency:
		return "key concurrency", k.Due
	case !k.NextToken.IsZero():
		return "key rate", k.Due
	}
	return "key pause", k.Due
}

// KeysHeldUntil is, when every limit key with jobs ready waits on its own limits (none
// is due at At), when the first is due; zero otherwise. The keys reported include the
// first ones the claims will serve, so the earliest due among them is the ring's.
func (s LimitStatus) KeysHeldUntil() time.Time {
	var first time.Time
	for _, k := range s.Keys {
		if k.Ready && (first.IsZero() || k.Due.Before(first)) {
			first = k.Due
		}
	}
	if first.After(s.At) {
		return first
	}
	return time.Time{}
}

// JobLimitWait says which limit holds a ready job back now, and until when at the latest.
type JobLimitWait struct {
	// On is the limit: "concurrency" or "rate" (the queue's), "key concurrency", "key
	// rate" or "key pause" (its limit key's); "" when none holds it back.
	On string
	// Desc says it in a sentence, e.g. `the queue's concurrency limit (concurrency 2, 2
	// running)` or `its limit key "cust-1" (key pause, 0 running)`.
	Desc string
	// Until is when the limit lets it go at the latest (its queue's next slot or token,
	// or when the claims serve its key next).
	Until time.Time
}

// LimitWaitOf says which limit holds job back, if it is ready and one does (`jobs
// inspect`, the dashboard's job page): its queue's first, then its limit key's.
func (c *Client) LimitWaitOf(ctx context.Context, job *Job) (JobLimitWait, error) {
	if job.State != StateReady {
		return JobLimitWait{}, nil
	}
	var keys []string
	if job.LimitKey != "" {
		keys = []string{job.LimitKey}
	}
	s, err := c.KeyLimits(ctx, job.Queue, keys...)
	if err != nil {
		return JobLimitWait{}, err
	}
	if w := s.Waiting(); w != "" {
		return JobLimitWait{string(w), fmt.Sprintf("the queue's %s limit (%s, %d running)", w, s.Limit, s.Running), ceilMs(s.Until())}, nil
	}
	for _, k := range s.Keys {
		if k.Key != job.LimitKey || job.LimitKey == "" {
			continue
		}
		if why, until := k.Waiting(s.At); why != "" {
			return JobLimitWait{why, fmt.Sprintf("its limit key %q (%s, %d running)", k.Key, why, k.Running), ceilMs(until)}, nil
		}
	}
	return JobLimitWait{}, nil
}

// ResumeKey ends a handler's pause of limit key key (worker.PauseKey, an exec handler's
// exit 77) before its time: the key's jobs are claimed again at once, the paused job
// first. It reports whether the key was paused; a key that was not changes nothing.
func (c *Client) ResumeKey(ctx context.Context, queue, key string) (bool, error) {
	if err := ValidateQueue(queue); err != nil {
		return false, err
	}
	if err := validateKey("limit key", key); err != nil {
		return false, err
	}
	if key == "" {
		return false, invalid("limit key is empty")
	}
	qk := c.keys.queue(queue)
	var n int64
	err := sent(ctx, "resume key "+key+" of "+queue, func() error {
		var err error
		n, err = c.run(ctx, scripts.Pause, []string{qk.paused, qk.wake, qk.events, qk.kpause(key), qk.ring},
			"k", c.eventsMax(), key).Int64()
		return err
	})
	return n == 1, err
}

// ceilMs is t in whole milliseconds, as every other time this package reports (a key's
// due time is in µs), rounded up: a limit's "until when at the latest" must not read
// earlier than it is.
func ceilMs(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(time.Millisecond - 1).Truncate(time.Millisecond)
}
