package queue

import (
	"encoding/json"
	"time"
)

// MaxAttempts is how many ended attempts a job's history keeps (the latest).
const MaxAttempts = 10

// Attempt is one ended attempt of a job: when it ran, on which worker, and how it ended.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	StartedAt  time.Time `json:"started_at"`  // its claim
	FinishedAt time.Time `json:"finished_at"` // its ack, fail or reap
	Worker     string    `json:"worker"`
	// Outcome is what the attempt led to: done, retry, dead (failed with none left, or
	// SkipRetry), reaped (its worker stopped renewing the lease), or cancelled (an
	// operator's cancel ended it).
	Outcome string `json:"outcome"`
	// Error is the line of the attempt's error that says most, at most 200 bytes
	// (LastError holds the latest in full).
	Error string `json:"error"`
}

// attemptRecord is one element of the job hash's attempts field, as the scripts write it
// (the lib's add_attempt): times in ms.
type attemptRecord struct {
	Attempt    int    `json:"attempt"`
	StartedAt  int64  `json:"started_at"`
	FinishedAt int64  `json:"finished_at"`
	Worker     string `json:"worker"`
	Outcome    string `json:"outcome"`
	Error      string `json:"error"`
}

// attemptsOf is a job's history: the records of its attempts that did not succeed (the
// hash's attempts field, raw), then, for a done job, the attempt that succeeded, which
// the scripts do not write (the ack would pay for it on every job): the job's own
// started_at, finished_at and worker describe it.
func attemptsOf(j *Job, raw string) []Attempt {
	var out []Attempt
	if raw != "" {
		var recs []attemptRecord
		if json.Unmarshal([]byte(raw), &recs) == nil {
			out = make([]Attempt, 0, len(recs)+1)
			for _, r := range recs {
				out = append(out, Attempt{Attempt: r.Attempt, StartedAt: msTimeOf(r.StartedAt),
					FinishedAt: msTimeOf(r.FinishedAt), Worker: r.Worker, Outcome: r.Outcome, Error: r.Error})
			}
		}
	}
	if j.State == StateDone && j.Attempt > 0 && !j.StartedAt.IsZero() {
		out = append(out, Attempt{Attempt: j.Attempt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
			Worker: j.Worker, Outcome: string(StateDone)})
	}
	if len(out) > MaxAttempts {
		out = out[len(out)-MaxAttempts:]
	}
	return out
}

func msTimeOf(ms int64) time.Time {
	if ms <= 0 || ms > maxJobMs {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// MarshalJSON renders the attempt in `jobs inspect --json`: times in RFC 3339 (UTC) or null.
func (a Attempt) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Attempt    int        `json:"attempt"`
		StartedAt  *time.Time `json:"started_at"`
		FinishedAt *time.Time `json:"finished_at"`
		Worker     string     `json:"worker"`
		Outcome    string     `json:"outcome"`
		Error      string     `json:"error"`
	}{a.Attempt, jsonTime(a.StartedAt), jsonTime(a.FinishedAt), a.Worker, a.Outcome, a.Error})
}
