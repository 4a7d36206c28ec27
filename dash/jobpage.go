package dash

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobs-dev/jobs/internal/printable"
	"github.com/jobs-dev/jobs/queue"
)

// jobData is the job page's data. Its JSON is the job as `jobs inspect --json` prints
// it, with what its keys hold now beside it.
type jobData struct {
	Job          *queue.Job `json:"job"`
	TTLMS        int64      `json:"ttl_ms"` // 0: the hash does not expire
	UniqueKey    string     `json:"unique_key"`
	UniqueHolder string     `json:"unique_holder"`
	UniqueTTLMS  int64      `json:"unique_ttl_ms"`
	LockHeld     bool       `json:"lock_held"`
	LockTTLMS    int64      `json:"lock_ttl_ms"`
	CLI          []string   `json:"cli"` // commands that act on this job from a shell
	// Why says what holds a waiting or running job back, if anything (see whyWaiting).
	Why []string `json:"why"`
	// WaitingOn is the limit that holds a ready job back ("" when none: see
	// queue.JobLimitWait), and WaitingUntil until when at the latest, as `jobs inspect
	// --json` says.
	WaitingOn    string     `json:"waiting_on"`
	WaitingUntil *time.Time `json:"waiting_until,omitempty"`
	// Dependencies are the jobs it waits or waited for (queue.After), with their state,
	// the first graphSide of them;
	// Batch is its batch's state and counts (nil outside a batch, or once the batch
	// record expired).
	Dependencies []queue.Dependency `json:"dependencies,omitempty"`
	Dependents   []queue.Dependent  `json:"dependents,omitempty"` // the jobs waiting on it: graphSide of them at most
	DependentsN  int                `json:"dependents_total,omitempty"`
	Batch        *queue.BatchStatus `json:"batch,omitempty"`
	// Graph is the job's neighbourhood, at most graphSide jobs a side (nil outside a workflow).
	Graph *workflowGraph `json:"-"`

	Payload shownBytes    `json:"-"`
	Result  shownBytes    `json:"-"`
	Actions []string      `json:"-"` // the actions its state allows
	TTL     time.Duration `json:"-"`
}

// shownBytes is a payload or result as the page shows it: indented JSON, text, or a hex
// dump when it is not UTF-8. Always text, never markup (html/template escapes it).
type shownBytes struct {
	Kind string // "json", "text", "hex" or "" (empty)
	Text string
}

func showBytes(b []byte) shownBytes {
	switch {
	case len(b) == 0:
		return shownBytes{}
	case !utf8.Valid(b):
		return shownBytes{Kind: "hex", Text: hex.Dump(b)}
	case json.Valid(b):
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") == nil {
			return shownBytes{Kind: "json", Text: printable.Escape(buf.String(), true)}
		}
	}
	return shownBytes{Kind: "text", Text: printable.Escape(string(b), true)}
}

// jobActionsFor lists the actions a job in state st accepts.
func jobActionsFor(st queue.State) []string {
	switch st {
	case queue.StateDead:
		return []string{"retry", "delete"}
	case queue.StateScheduled, queue.StateRetry:
		return []string{"run", "cancel", "delete"}
	case queue.StateReady, queue.StateWaiting:
		return []string{"cancel", "delete"}
	case queue.StateActive:
		return []string{"cancel"}
	case queue.StateDone:
		return []string{"delete"}
	}
	return nil
}

func (h *Handler) jobPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query().Get("queue")
	ctx := r.Context()
	var j *queue.Job
	var err error
	if q == "" {
		j, err = h.client.Find(ctx, id)
	} else {
		j, err = h.client.Get(ctx, q, id)
	}
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	det, err := h.client.Detail(ctx, j)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	d := jobData{Job: j, TTLMS: det.TTL.Milliseconds(), UniqueKey: det.UniqueKey, UniqueHolder: det.UniqueHolder,
		UniqueTTLMS: det.UniqueTTL.Milliseconds(), LockHeld: det.LockHeld, LockTTLMS: det.LockTTL.Milliseconds(),
		Payload: showBytes(j.Payload), Result: showBytes(j.Result), Actions: jobActionsFor(j.State), TTL: det.TTL}
	now, err := h.redisNow(ctx)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	lw, err := h.client.LimitWaitOf(ctx, j)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	if d.WaitingOn = lw.On; !lw.Until.IsZero() {
		u := lw.Until.UTC()
		d.WaitingUntil = &u
	}
	if d.Why, err = h.whyWaiting(ctx, j, det, lw, now); err != nil {
		h.failQueue(w, r, err)
		return
	}
	if d.Why == nil {
		d.Why = []string{}
	}
	bounded := *j // the dependencies past graphSide are counted, not read
	bounded.After = j.After[:min(len(j.After), graphSide)]
	if d.Dependencies, err = h.client.Dependencies(ctx, &bounded); err != nil {
		h.failQueue(w, r, err)
		return
	}
	if d.Dependents, d.DependentsN, err = h.client.Dependents(ctx, j, graphSide); err != nil {
		h.failQueue(w, r, err)
		return
	}
	d.Graph = graphOf(j, d.Dependencies, d.Dependents, d.DependentsN)
	if !j.Batch.IsZero() {
		d.Batch, _ = h.client.BatchStatus(ctx, j.Batch) // nil once the batch record expired
	}
	qid := "--queue " + shellQuote(j.Queue) + " " + shellQuote(j.ID)
	d.CLI = []string{"jobs inspect " + qid}
	switch j.State {
	case queue.StateDead, queue.StateScheduled, queue.StateRetry:
		d.CLI = append(d.CLI, "jobs retry "+qid)
	}
	if j.State != queue.StateDone && j.State != queue.StateDead {
		d.CLI = append(d.CLI, "jobs cancel "+qid)
	}
	h.render(w, r, "job", "Job "+printable.Escape(j.ID, false), d, nil)
}

// shellQuote quotes s for a POSIX shell: as is when it holds only safe characters, else
// in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:/=@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
