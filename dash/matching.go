package dash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jobs-dev/jobs/queue"
)

// An action on "every job matching this filter" takes two steps. GET
// /queues/{q}/matching counts the matches first and shows the count, with a form to
// confirm it: a plain button up to Options.ConfirmAbove jobs, above it a field where the
// operator types the count (or the queue's name). POST /queues/{q}/matching then acts in
// bounded batches, and refuses unless the form carries the count page's token (an HMAC
// of the queue, state, action, filter and count, keyed per Handler) and, above the
// threshold, that count typed: no request skips the count, nor confirms a smaller one
// than was shown. The key is drawn when the Handler is made: behind a load balancer of
// several dashboards, a batch that reaches another process is refused (count again).

// matchForm is what both steps are given: which jobs, and what to do to them.
type matchForm struct {
	State  queue.State `json:"state"`
	Do     string      `json:"do"`
	Filter filter      `json:"filter"`
}

// parseMatchForm checks the state, the action (one its jobs accept) and the filter (at
// least one field: without one, the queue's own actions apply).
func parseMatchForm(v url.Values) (matchForm, error) {
	st, err := queue.ParseState(v.Get("state"))
	if err != nil {
		return matchForm{}, fmt.Errorf("form field state: %w", err)
	}
	m := matchForm{State: st, Do: v.Get("do"), Filter: filter{Type: v.Get("type"), Error: v.Get("error"), Payload: v.Get("payload")}}
	if !slices.Contains(jobActionsFor(st), m.Do) {
		return m, fmt.Errorf("form field do %q: %s jobs take %s", m.Do, st, strings.Join(jobActionsFor(st), ", "))
	}
	if !m.Filter.active() {
		return m, errors.New("a filter (type, error or payload) is needed: without one, use the queue's own actions")
	}
	for name, x := range map[string]string{"type": m.Filter.Type, "error": m.Filter.Error, "payload": m.Filter.Payload} {
		if len(x) > maxFilter || !utf8.ValidString(x) {
			return m, fmt.Errorf("filter %s: want UTF-8 text of at most %d bytes", name, maxFilter)
		}
	}
	return m, nil
}

// token is the proof that the count page showed count for (q, m).
func (h *Handler) token(q string, m matchForm, count int64) string {
	mac := hmac.New(sha256.New, h.key[:])
	for _, s := range []string{q, string(m.State), m.Do, m.Filter.Type, m.Filter.Error, m.Filter.Payload,
		strconv.FormatInt(count, 10)} {
		mac.Write([]byte(strconv.Itoa(len(s)) + ":" + s)) // length-prefixed: no two tuples write the same bytes
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// matchCount is the count page's data, and its JSON.
type matchCount struct {
	Queue string `json:"queue"`
	matchForm
	// Count is what the operator confirms: the matches when Complete, else at most this
	// many (the matches among the jobs read, plus every job of the state not read).
	Count    int64  `json:"count"`
	Matched  int    `json:"matched"`  // matches among the jobs read
	Read     int    `json:"read"`     // jobs read to count
	Total    int64  `json:"total"`    // jobs in the state when the count began
	Complete bool   `json:"complete"` // every job of the state was read
	Typed    bool   `json:"typed"`    // Count > Options.ConfirmAbove: it must be typed
	Token    string `json:"token"`    // the POST's proof of this count
}

// matchingCount counts the jobs that match, reading at most Options.CountLimit jobs.
func (h *Handler) matchingCount(w http.ResponseWriter, r *http.Request) {
	q := r.PathValue("queue")
	if err := queue.ValidateQueue(q); err != nil {
		h.failQueue(w, r, err)
		return
	}
	m, err := parseMatchForm(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx := r.Context()
	total, err := h.count(r, q, m.State)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	d := matchCount{Queue: q, matchForm: m, Total: total}
	cursor := ""
	for {
		p, err := h.client.Page(ctx, q, m.State, cursor, min(queue.MaxPage, h.opts.CountLimit))
		if err != nil {
			h.failQueue(w, r, err)
			return
		}
		d.Read += p.Read
		for _, j := range p.Jobs {
			if m.Filter.match(j) {
				d.Matched++
			}
		}
		cursor = p.Next
		if cursor == "" || d.Read >= h.opts.CountLimit {
			break
		}
	}
	d.Complete = cursor == ""
	d.Count = int64(d.Matched)
	if !d.Complete {
		d.Count += max(0, total-int64(d.Read))
	}
	d.Typed = d.Count > int64(h.opts.ConfirmAbove)
	d.Token = h.token(q, m, d.Count)
	title := fmt.Sprintf("%s %d matching %s jobs", m.Do, d.Count, m.State)
	h.render(w, r, "matchcount", title, d, nil)
}

// matchingData is the progress page of an action on every job matching a filter.
type matchingData struct {
	Queue string `json:"queue"`
	matchForm
	Count   int64  `json:"count"`   // the count confirmed
	Token   string `json:"-"`       // its token, carried to the next batch
	Confirm string `json:"-"`       // what was typed, carried to the next batch
	Changed int    `json:"changed"` // jobs changed so far, this batch included
	Read    int    `json:"read"`    // jobs read so far
	Failed  int    `json:"failed"`  // matches the action refused so far
	Next    string `json:"next"`    // where the next batch starts; "" when done
}

// checkConfirmed refuses a batch whose form lacks the count page's token for its count,
// or, above Options.ConfirmAbove, that count (or the queue's name) typed in confirm.
func (h *Handler) checkConfirmed(r *http.Request, q string, m matchForm) (int64, error) {
	count, err := strconv.ParseInt(r.PostFormValue("count"), 10, 64)
	want := h.token(q, m, count)
	if err != nil || count < 0 || !hmac.Equal([]byte(r.PostFormValue("token")), []byte(want)) {
		return 0, errors.New("the count of the matching jobs was not confirmed: open the count page " +
			"(Every match... on the filtered list) and confirm it")
	}
	if c := r.PostFormValue("confirm"); count > int64(h.opts.ConfirmAbove) && c != strconv.FormatInt(count, 10) && c != q {
		return 0, fmt.Errorf("acting on up to %d jobs needs that count, %d, or the queue's name typed in the confirm field",
			count, count)
	}
	return count, nil
}

// matchingAction applies one action (do: retry, run, cancel, delete) to every job of a
// state that matches a filter, confirmed on the count page, one bounded batch per
// request: it reads at most Options.ScanLimit jobs from the cursor, acts on the matches
// (one script call each), and answers with how far it got and a form to go on.
func (h *Handler) matchingAction(w http.ResponseWriter, r *http.Request, q string) {
	m, err := parseMatchForm(r.PostForm)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	count, err := h.checkConfirmed(r, q, m)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	d := matchingData{Queue: q, matchForm: m, Count: count, Token: r.PostFormValue("token"), Confirm: r.PostFormValue("confirm")}
	for name, p := range map[string]*int{"changed": &d.Changed, "read": &d.Read, "failed": &d.Failed} {
		v := r.PostFormValue(name)
		n, err := strconv.Atoi(v)
		if v != "" && (err != nil || n < 0) {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("form field %s %q: want a count", name, v))
			return
		}
		*p = n
	}
	ctx := r.Context()
	cursor, read, changed, failed := r.PostFormValue("cursor"), 0, 0, 0
	// A ready page's cursor is a position in a list (queue.Client.Page), and cancel and
	// delete take a ready job out of that list: the jobs behind it move up into the page
	// just read. So a ready page that lost jobs is read again from the same cursor (the
	// first page's is "0", as "" would say the end), and tried keeps a job refused there
	// from being tried and counted twice.
	shifts := m.State == queue.StateReady
	tried := map[string]bool{}
	for {
		p, err := h.client.Page(ctx, q, m.State, cursor, h.opts.PageSize)
		if err != nil {
			h.failQueue(w, r, err)
			return
		}
		read += p.Read
		removed := 0
		for _, j := range p.Jobs {
			if !m.Filter.match(j) || tried[j.ID] {
				continue
			}
			tried[j.ID] = true
			if err := h.runJobAction(ctx, m.Do, q, j.ID); err != nil {
				failed++
			} else {
				changed++
				removed++
			}
		}
		if shifts && removed > 0 {
			if cursor == "" {
				cursor = "0"
			}
		} else {
			cursor = p.Next
		}
		if cursor == "" || read >= h.opts.ScanLimit {
			break
		}
	}
	d.Changed, d.Read, d.Failed, d.Next = d.Changed+changed, d.Read+read, d.Failed+failed, cursor
	e := queue.AuditEntry{Action: "matching-" + m.Do, Queue: q, Count: changed,
		Target: cut(fmt.Sprintf("%s type=%q error=%q payload=%q (confirmed: %d)", m.State, m.Filter.Type, m.Filter.Error,
			m.Filter.Payload, count), 500)}
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
		v := url.Values{"state": {string(m.State)}, "done": {"matching"}}
		http.Redirect(w, r, h.opts.BasePath+"/queues/"+segment(q)+"?"+v.Encode(), http.StatusSeeOther)
		return
	}
	h.page(w, r, http.StatusOK, "matching", "Every match", d)
}
