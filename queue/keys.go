package queue

import "strconv"

// keys builds every Redis key name in the project: KEYS.md documents each one. All keys of
// one queue share the hash tag {queue}, so each script touches one Redis Cluster slot.
type keys struct {
	prefix string // "jobs"
}

// queues is the SET of known queue names (outside any queue's slot: never used in a script).
func (k keys) queues() string { return k.prefix + ":queues" }

// audit is the STREAM of operators' actions (the dashboard's audit log), in its own slot.
func (k keys) audit() string { return k.prefix + ":{audit}:log" }

// queueKeys are the keys of one queue.
type queueKeys struct {
	jobPrefix string // "jobs:{q}:job:" + id is a job's hash
	ready     string
	scheduled string
	retry     string
	active    string
	dead      string
	done      string
	wake      string
	paused    string
	limit     string // HASH: the queue's limits and the rate's GCRA state (limit.go)
	events    string // STREAM: one entry per transition (see events.go)
	stats     string // prefix of the daily counters: stats + "processed:2026-12-02"
	metrics   string // prefix of the metrics history: metrics + "m:<unix minute>", "h:<unix hour>"
	waiting   string // ZSET: jobs waiting for their dependencies (workflow.go), score = created_at
	outbox    string // HASH: resolutions for other queues' slots, delivered by workers (outbox.go)
	ring      string // ZSET: the limit keys with jobs ready (keyready.go, scripts/lib)
	waiters   string // ZSET: workers waiting for hand-offs (handoff.go)
	base      string // "jobs:{q}:": the per-job workflow keys are built on it
}

func (k keys) queue(name string) queueKeys {
	base := k.prefix + ":{" + name + "}:"
	return queueKeys{
		jobPrefix: base + "job:",
		ready:     base + "ready",
		scheduled: base + "scheduled",
		retry:     base + "retry",
		active:    base + "active",
		dead:      base + "dead",
		done:      base + "done",
		wake:      base + "wake",
		paused:    base + "paused",
		limit:     base + "limit",
		events:    base + "events",
		stats:     base + "stats:",
		metrics:   base + "metrics:",
		waiting:   base + "waiting",
		outbox:    base + "outbox",
		ring:      base + "keys",
		waiters:   base + "waiters",
		base:      base,
	}
}

func (q queueKeys) job(id string) string { return q.jobPrefix + id }

// kready is the LIST of limit key k's ready jobs: keyed jobs wait there, not in ready.
func (q queueKeys) kready(k string) string { return q.base + "kready:" + k }

// kpause is the STRING present while a handler's pause of limit key k lasts.
func (q queueKeys) kpause(k string) string { return q.base + "kpause:" + k }

// hand is the LIST of the jobs handed to worker (handoff.go).
func (q queueKeys) hand(worker string) string { return q.base + "hand:" + worker }

// deps is the SET of a waiting job's dependencies not yet ended ("queue\tid" members).
func (q queueKeys) deps(id string) string { return q.base + "deps:" + id }

// dependents is the SET of the jobs waiting on job id ("queue\tid" members).
func (q queueKeys) dependents(id string) string { return q.base + "dependents:" + id }

// batch is the HASH of a batch (counts, state, callbacks); batchPending its SET of the
// children not yet ended ("queue\tid" members).
func (q queueKeys) batch(id string) string        { return q.base + "batch:" + id }
func (q queueKeys) batchPending(id string) string { return q.base + "batch:" + id + ":pending" }

// index is the list or set that holds the queue's jobs in state st.
func (q queueKeys) index(st State) string {
	switch st {
	case StateReady:
		return q.ready
	case StateScheduled:
		return q.scheduled
	case StateRetry:
		return q.retry
	case StateActive:
		return q.active
	case StateDone:
		return q.done
	case StateDead:
		return q.dead
	case StateWaiting:
		return q.waiting
	}
	return ""
}

// metricsMinute is the metrics history hash of one minute (Unix ms / 60,000).
func (q queueKeys) metricsMinute(minute int64) string {
	return q.metrics + "m:" + strconv.FormatInt(minute, 10)
}

// metricsHour is the metrics history hash of one hour (Unix ms / 3,600,000).
func (q queueKeys) metricsHour(hour int64) string {
	return q.metrics + "h:" + strconv.FormatInt(hour, 10)
}

// unique is the dedup key of a unique job: in the queue's slot, so the enqueue script can
// take it atomically with the job.
func (q queueKeys) unique(key string) string {
	return q.jobPrefix[:len(q.jobPrefix)-len("job:")] + "unique:" + key
}

// cancelChannel is the pub/sub channel on which cancel.lua announces each cancel of an
// active job (see WatchCancels). A channel is not a key: it has no slot, and a PUBLISH on
// a Redis Cluster reaches the subscribers on every node.
func (k keys) cancelChannel() string { return k.prefix + ":cancel" }

// queueOfWake returns the queue name in a wake list key ("jobs:{q}:wake" -> "q").
func (k keys) queueOfWake(key string) string {
	start := len(k.prefix) + 2
	end := len(key) - len("}:wake")
	if start > end {
		return ""
	}
	return key[start:end]
}
