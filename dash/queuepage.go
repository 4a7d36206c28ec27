package dash

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/jobs-dev/jobs/queue"
)

// listData is the queue page's data, and its JSON: one page of the queue's jobs in one
// state (each as `jobs inspect --json` prints it), its counts, and the cursor of the
// next page.
type listData struct {
	Queue  string           `json:"queue"`
	State  queue.State      `json:"state"`
	Stats  queue.QueueStats `json:"stats"`
	Jobs   []*queue.Job     `json:"jobs"`
	Cursor string           `json:"cursor"` // this page's cursor ("" for the first)
	Next   string           `json:"next"`   // the next page's; "" on the last
	Filter filter           `json:"filter"`
	// Scanned is how many jobs this request read to fill the page: with a filter, at most
	// Options.ScanLimit; Next then goes on scanning from where it stopped.
	Scanned  int      `json:"scanned"`
	Stuck    []string `json:"stuck"`
	NextURL  string   `json:"-"`
	FirstURL string   `json:"-"`
}

// filter narrows a list to jobs whose type, last error or payload contain the given
// text (type and error ignore case; the payload is matched byte for byte).
type filter struct {
	Type    string `json:"type"`
	Error   string `json:"error"`
	Payload string `json:"payload"`
}

func (f filter) active() bool { return f.Type != "" || f.Error != "" || f.Payload != "" }

func (f filter) match(j *queue.Job) bool {
	return (f.Type == "" || containsFold(j.Type, f.Type)) &&
		(f.Error == "" || containsFold(j.LastError, f.Error)) &&
		(f.Payload == "" || bytes.Contains(j.Payload, []byte(f.Payload)))
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// maxFilter bounds each filter's text: a filter is a substring, not a document.
const maxFilter = 200

func (h *Handler) queuePage(w http.ResponseWriter, r *http.Request) {
	q := r.PathValue("queue")
	if err := queue.ValidateQueue(q); err != nil {
		h.failQueue(w, r, err)
		return
	}
	qv := r.URL.Query()
	state := queue.StateReady
	if s := qv.Get("state"); s != "" {
		st, err := queue.ParseState(s)
		if err != nil {
			h.failQueue(w, r, err)
			return
		}
		state = st
	}
	f := filter{Type: qv.Get("type"), Error: qv.Get("error"), Payload: qv.Get("payload")}
	for name, v := range map[string]string{"type": f.Type, "error": f.Error, "payload": f.Payload} {
		if len(v) > maxFilter || !utf8.ValidString(v) {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("filter %s: want UTF-8 text of at most %d bytes", name, maxFilter))
			return
		}
	}
	ctx := r.Context()
	stats, err := h.client.StatsOf(ctx, q)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	now, err := h.redisNow(ctx)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	d := listData{Queue: q, State: state, Stats: stats[0], Cursor: qv.Get("cursor"), Filter: f, Jobs: []*queue.Job{},
		Stuck: append([]string{}, stuck(stats[0], now)...)}
	cursor := d.Cursor
	for {
		p, err := h.client.Page(ctx, q, state, cursor, h.opts.PageSize)
		if errors.Is(err, queue.ErrNotFound) {
			h.fail(w, r, http.StatusNotFound, fmt.Errorf("no queue %q (no job was ever enqueued on it)", q))
			return
		}
		if err != nil {
			h.failQueue(w, r, err)
			return
		}
		d.Scanned += p.Read
		d.Next = p.Next
		for _, j := range p.Jobs {
			if f.match(j) {
				d.Jobs = append(d.Jobs, j)
			}
		}
		cursor = p.Next
		// Unfiltered: one page. Filtered: whole pages until one is full, the budget is
		// spent or the state has no more.
		if !f.active() || len(d.Jobs) >= h.opts.PageSize || d.Scanned >= h.opts.ScanLimit || p.Next == "" {
			break
		}
	}
	link := func(cur string) string {
		v := url.Values{"state": {string(state)}}
		for k, x := range map[string]string{"type": f.Type, "error": f.Error, "payload": f.Payload, "cursor": cur} {
			if x != "" {
				v.Set(k, x)
			}
		}
		return h.opts.BasePath + "/queues/" + segment(q) + "?" + v.Encode()
	}
	if d.Next != "" {
		d.NextURL = link(d.Next)
	}
	if d.Cursor != "" {
		d.FirstURL = link("")
	}
	h.render(w, r, "queue", "Queue "+q, d, nil)
}
