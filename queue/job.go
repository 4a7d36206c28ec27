package queue

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// State is where a job is in its lifecycle (see the package doc's diagram).
type State string

// The states. A job is in exactly one; done and dead are terminal.
const (
	StateWaiting   State = "waiting"   // waiting for its dependencies to end (see After)
	StateScheduled State = "scheduled" // waiting for its run_at
	StateReady     State = "ready"     // waiting for a worker
	StateActive    State = "active"    // claimed by a worker under a lease
	StateRetry     State = "retry"     // failed, waiting for its next attempt
	StateDone      State = "done"      // succeeded; kept for Config.DoneRetention
	StateDead      State = "dead"      // failed for good; kept for Config.DeadRetention
)

// Job is one job as stored in its Redis hash (jobs:{queue}:job:<id>).
type Job struct {
	ID         string
	Type       string
	Queue      string
	Payload    []byte
	State      State
	Attempt    int // runs started so far; 1 during the first run
	MaxRetry   int
	Timeout    time.Duration
	CreatedAt  time.Time
	RunAt      time.Time // when it was (or is) due; zero if never delayed, retried since (Retry), or cancelled while waiting
	StartedAt  time.Time // start of the latest attempt: to the microsecond for a worker's copy, to the ms when read back
	FinishedAt time.Time // end of the latest attempt
	Worker     string    // worker of the latest attempt
	LastError  string
	Result     []byte
	// Exclusive is the lock key of an exclusive job (see [Exclusive]); empty otherwise.
	Exclusive string
	// LimitKey is the job's limit key (see [LimitKey]); empty otherwise.
	LimitKey string
	// Meta is the job's metadata (see [Meta]); nil when it has none.
	Meta map[string]string
	// Postponed counts the times a worker gave the job back unrun with a delay (an
	// exclusive job whose lock was held, a type it has no handler for); those runs are
	// not counted in Attempt.
	Postponed int
	// Progress is the percentage (0 to 100) the job's handler last reported
	// (worker.Progress, or an exec handler's line on file descriptor 3), ProgressMessage
	// what it said with it, and ProgressAt when the worker stored it (Redis time; zero
	// when no progress was ever reported). A worker stores progress at most about once a
	// second and once when the handler returns, only while it holds the job's lease. A
	// retried job keeps the progress of its earlier attempt until the new one reports.
	Progress        int
	ProgressMessage string
	ProgressAt      time.Time
	// Attempts is the job's history: its last 10 attempts that ended, oldest first (see
	// [Attempt]). A running attempt is not in it yet.
	Attempts []Attempt

	// After lists the jobs this one waits for (After, AfterJob), in the order given; nil
	// for a job without dependencies. [Client.Dependencies] reads their state and results.
	After []JobRef
	// IgnoreDependencyFailure: the job runs even when a dependency died (see
	// [IgnoreDependencyFailure]).
	IgnoreDependencyFailure bool
	// Batch is the batch the job belongs to (see [Client.NewBatch]); zero when none. A
	// handler adds jobs to its own batch with [Client.BatchAdd](ctx, job.Batch, ...).
	Batch BatchRef

	// Lease is the fencing token of the worker's claim: the worker keeps it and presents
	// it with every report on the job. Empty on the copy a handler gets (what a handler
	// reports goes through the worker) and when read back.
	Lease string

	// hint is set on a claim's copy whose hash had neither unique_key nor batch: its ack
	// tells the script so (ackHint), which then reads fewer fields: '1' without a
	// limit_key either, '2' with one. Those fields never change while a lease holds. A
	// Job built any other way has none (0), and its ack reads them all.
	hint byte
}

// ackHintOf is the ack hint of a claimed job's hash (a flat field/value array): whether
// it has none of the fields its ack reads only for the jobs that have them (ack_jobs in
// scripts/lib), '1', or of them only limit_key, '2'; else 0.
func ackHintOf(flat []any) byte {
	hint := byte('1')
	for i := 0; i < len(flat); i += 2 {
		switch flat[i] {
		case "unique_key", "batch":
			return 0
		case "limit_key":
			hint = '2'
		}
	}
	return hint
}

// ackHint is the job's character in an ack's hints (ack.lua, ackclaim.lua): its hint
// (see Job.hint), or '0' to have every field read.
func (j *Job) ackHint() byte {
	if j.hint != 0 {
		return j.hint
	}
	return '0'
}

// decodeJob builds a Job from its hash fields. Unknown fields are ignored and missing ones
// stay zero, so hashes written by older or newer versions still decode.
func decodeJob(queue, id string, h map[string]string) *Job {
	d := jobFields{j: &Job{ID: id, Queue: queue}, nfields: len(h)}
	for k, v := range h {
		d.set(k, v)
	}
	return d.done()
}

// decodeFlat decodes a job's hash given as a flat field/value array (HGETALL as returned
// by a script), as decodeJob does, without building a map: it is the claim's hot path.
func decodeFlat(queue, id string, flat []any) *Job {
	d := jobFields{j: &Job{ID: id, Queue: queue}, nfields: len(flat) / 2}
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		switch v := flat[i+1].(type) {
		case string:
			d.set(k, v)
		case int64: // a Lua number in the reply
			d.set(k, strconv.FormatInt(v, 10))
		}
	}
	return d.done()
}

// jobFields fills a Job from its hash fields, given in any order.
type jobFields struct {
	j       *Job
	nfields int
	// The payload, stored by enqueue.lua in 64-byte pieces so the hash stays listpack
	// encoded: pieces[0] is "payload", pieces[n] is "payload+n"; have[n] says whether
	// that field exists.
	pieces []string
	have   []bool
	// attempts is the raw attempts field (JSON), decoded once every field is known.
	attempts string
	// Whether the hash has these fields: enqueue.lua leaves max_retry and timeout_ms out at
	// their defaults, and created_at when the generated ID's time is it.
	maxRetry, timeout, created bool
}

func (d *jobFields) set(k, v string) {
	j := d.j
	switch k {
	case "type":
		j.Type = v
	case "state":
		j.State = State(v)
	case "attempt":
		j.Attempt = atoi(v)
	case "max_retry":
		j.MaxRetry, d.maxRetry = atoi(v), true
	case "timeout_ms":
		j.Timeout, d.timeout = time.Duration(atoi(v))*time.Millisecond, true
	case "created_at":
		j.CreatedAt, d.created = msTime(v), true
	case "run_at":
		j.RunAt = msTime(v)
	case "started_at":
		j.StartedAt = msTime(v)
	case "finished_at":
		j.FinishedAt = msTime(v)
	case "worker":
		j.Worker = v
	case "last_error":
		j.LastError = v
	case "lease":
		j.Lease = v
	case "exclusive":
		j.Exclusive = v
	case "limit_key":
		j.LimitKey = v
	case "postponed":
		j.Postponed = atoi(v)
	case "progress":
		j.Progress = atoi(v)
	case "progress_msg":
		j.ProgressMessage = v
	case "progress_at":
		j.ProgressAt = msTime(v)
	case "result":
		j.Result = []byte(v)
	case "after":
		j.After = parseAfter(v)
	case "dep_policy":
		j.IgnoreDependencyFailure = v == "run"
	case "batch":
		if r, ok := parseMember(v); ok {
			j.Batch = BatchRef(r)
		}
	case "attempts":
		d.attempts = v
	case "payload":
		d.piece(0, v)
	default:
		if key, ok := strings.CutPrefix(k, "m:"); ok {
			if j.Meta == nil {
				j.Meta = map[string]string{}
			}
			j.Meta[key] = v
			return
		}
		n, ok := strings.CutPrefix(k, "payload+")
		if !ok {
			return
		}
		// Pieces past the number of fields cannot continue the run from payload+1, and
		// only the canonical spelling of a number names a piece.
		if i, err := strconv.Atoi(n); err == nil && i >= 1 && i < d.nfields && strconv.Itoa(i) == n {
			d.piece(i, v)
		}
	}
}

func (d *jobFields) piece(i int, v string) {
	for len(d.pieces) <= i {
		d.pieces = append(d.pieces, "")
		d.have = append(d.have, false)
	}
	d.pieces[i], d.have[i] = v, true
}

// done returns the Job with its payload: the pieces joined in order, up to the first
// missing one (nil when there is no payload field), and the fields the hash leaves out
// at their defaults filled in.
func (d *jobFields) done() *Job {
	if !d.maxRetry {
		d.j.MaxRetry = DefaultMaxRetry
	}
	if !d.timeout {
		d.j.Timeout = DefaultTimeout
	}
	if !d.created {
		d.j.CreatedAt = idTime(d.j.ID)
	}
	d.j.Attempts = attemptsOf(d.j, d.attempts)
	if len(d.have) == 0 || !d.have[0] {
		return d.j
	}
	if len(d.have) == 1 || !d.have[1] {
		d.j.Payload = []byte(d.pieces[0])
		return d.j
	}
	size := 0
	for i := 0; i < len(d.have) && d.have[i]; i++ {
		size += len(d.pieces[i])
	}
	b := make([]byte, 0, size)
	for i := 0; i < len(d.have) && d.have[i]; i++ {
		b = append(b, d.pieces[i]...)
	}
	d.j.Payload = b
	return d.j
}

func atoi(s string) int {
	if s == "" { // a missing field: no error value to allocate
		return 0
	}
	n, _ := strconv.Atoi(s)
	return n
}

func msTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > maxJobMs {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// maxJobMs is the last millisecond of year 9999: a later time (a hand-edited hash, say)
// reads as unknown, since RFC 3339, and so `jobs inspect --json`, cannot express it.
var maxJobMs = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()

// jobJSON is the shape of `jobs inspect --json` and `jobs ls --json`: every field always
// present, times in RFC 3339 (UTC) or null, payload and result as text (base64 when they
// are not UTF-8, flagged by *_base64).
type jobJSON struct {
	ID            string            `json:"id"`
	Type          string            `json:"type"`
	Queue         string            `json:"queue"`
	State         State             `json:"state"`
	Attempt       int               `json:"attempt"`
	MaxRetry      int               `json:"max_retry"`
	TimeoutS      float64           `json:"timeout_s"`
	Payload       string            `json:"payload"`
	PayloadBase64 bool              `json:"payload_base64,omitempty"`
	CreatedAt     *time.Time        `json:"created_at"`
	RunAt         *time.Time        `json:"run_at"`
	StartedAt     *time.Time        `json:"started_at"`
	FinishedAt    *time.Time        `json:"finished_at"`
	Worker        string            `json:"worker"`
	LastError     string            `json:"last_error"`
	Result        string            `json:"result"`
	ResultBase64  bool              `json:"result_base64,omitempty"`
	Exclusive     string            `json:"exclusive,omitempty"`
	LimitKey      string            `json:"limit_key,omitempty"`
	Meta          map[string]string `json:"meta,omitempty"`
	Postponed     int               `json:"postponed"`
	Progress      *int              `json:"progress"`
	ProgressMsg   string            `json:"progress_msg"`
	ProgressAt    *time.Time        `json:"progress_at"`
	Attempts      []Attempt         `json:"attempts"`
	After         []string          `json:"after,omitempty"` // "queue/id" of each dependency
	IgnoreDepFail bool              `json:"ignore_dependency_failure,omitempty"`
	Batch         string            `json:"batch,omitempty"` // "queue/batch"
}

// MarshalJSON renders the job in the CLI's JSON contract (see README).
func (j *Job) MarshalJSON() ([]byte, error) {
	v := jobJSON{
		ID: j.ID, Type: j.Type, Queue: j.Queue, State: j.State, Attempt: j.Attempt,
		MaxRetry: j.MaxRetry, TimeoutS: j.Timeout.Seconds(),
		CreatedAt: jsonTime(j.CreatedAt), RunAt: jsonTime(j.RunAt),
		StartedAt: jsonTime(j.StartedAt), FinishedAt: jsonTime(j.FinishedAt),
		Worker: j.Worker, LastError: j.LastError, Exclusive: j.Exclusive, LimitKey: j.LimitKey, Meta: j.Meta, Postponed: j.Postponed,
		Attempts: j.Attempts,
	}
	if v.Attempts == nil {
		v.Attempts = []Attempt{}
	}
	if !j.ProgressAt.IsZero() {
		p := j.Progress
		v.Progress, v.ProgressMsg, v.ProgressAt = &p, j.ProgressMessage, jsonTime(j.ProgressAt)
	}
	for _, r := range j.After {
		v.After = append(v.After, r.String())
	}
	v.IgnoreDepFail = j.IgnoreDependencyFailure
	if !j.Batch.IsZero() {
		v.Batch = j.Batch.String()
	}
	v.Payload, v.PayloadBase64 = text(j.Payload)
	v.Result, v.ResultBase64 = text(j.Result)
	return json.Marshal(v)
}

func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func text(b []byte) (string, bool) {
	if utf8.Valid(b) {
		return string(b), false
	}
	return base64.StdEncoding.EncodeToString(b), true
}
