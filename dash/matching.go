package dash

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jobs-dev/jobs/queue"
)

// matchingData is the progress page of an action on every job matching a filter.
type matchingData struct {
	Queue   string      `json:"queue"`
	State   queue.State `json:"state"`
	Filter  filter      `json:"filter"`
	Do      string      `json:"do"`
	Changed int         `json:"changed"` // jobs changed so far, this batch included
	Read    int         `json:"read"`    // jobs read so far
	Failed  int         `json:"failed"`  // matches the action refused so far
	Next    string      `json:"next"`    // where the next batch starts; "" when done
}

// matchingAction applies one action (do: retry, run, cancel, delete) to every job of a
// state that matches a filter, one bounded batch per request: it reads at most
// Options.ScanLimit jobs from the cursor, acts on the matches (one script call each), and
// answers with how far it got and a form to go on. How many match is not known before
// the whole state is read, which no single request does.
func (h *Handler) matchingAction(w http.ResponseWriter, r *http.Request, q string) {
	st, err := queue.ParseState(r.PostFormValue("state"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("form field state: %w", err))
		return
	}
	d := matchingData{Queue: q, State: st, Do: r.PostFormValue("do"),
		Filter: filter{Type: r.PostFormValue("type"), Error: r.PostFormValue("error"), Payload: r.PostFormValue("payload")}}
	if !slices.Contains(jobActionsFor(st), d.Do) {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("form field do %q: %s jobs take %s", d.Do, st,
			strings.Join(jobActionsFor(st), ", ")))
		return
	}
	if !d.Filter.active() {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("a filter (type, error or payload) is needed: without one, use the queue's own actions"))
		return
	}
	for name, v := range map[string]string{"changed": r.PostFormValue("changed"), "read": r.PostFormValue("read"),
		"failed": r.PostFormValue("failed")} {
		n, err := strconv.Atoi(v)
		if v != "" && (err != nil || n < 0) {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("form field %s %q: want a count", name, v))
			return
		}
		switch name {
		case "changed":
			d.Changed = n
		case "read":
			d.Read = n
		case "failed":
			d.Failed = n
		}
	}
	ctx := r.Context()
	cursor, read, changed, failed := r.PostFormValue("cursor"), 0, 0, 0
	for {
		p, err := h.client.Page(ctx, q, st, cursor, h.opts.PageSize)
		if err != nil {
			h.failQueue(w, r, err)
			return
		}
		read += p.Read
		for _, j := range p.Jobs {
			if !d.Filter.match(j) {
				continue
			}
			if err := h.runJobAction(ctx, d.Do, q, j.ID); err != nil {
				failed++
			} else {
				changed++
			}
		}
		cursor = p.Next
		if cursor == "" || read >= h.opts.ScanLimit {
			break
		}
	}
	d.Changed, d.Read, d.Failed, d.Next = d.Changed+changed, d.Read+read, d.Failed+failed, cursor
	e := queue.AuditEntry{Action: "matching-" + d.Do, Queue: q, Count: changed,
		Target: cut(fmt.Sprintf("%s type=%q error=%q payload=%q", st, d.Filter.Type, d.Filter.Error, d.Filter.Payload), 500)}
	var aerr error
	if failed > 0 {
		aerr = fmt.Errorf("%d matches refused the action", failed)
	}
	h.audit(r, e, aerr)
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, d)
		return
	}
	if d.Next == "" {
		v := url.Values{"state": {string(st)}, "done": {"matching"}}
		http.Redirect(w, r, h.opts.BasePath+"/queues/"+url.PathEscape(q)+"?"+v.Encode(), http.StatusSeeOther)
		return
	}
	h.page(w, r, http.StatusOK, "matching", "Every match", d)
}
