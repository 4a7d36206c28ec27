package dash

import (
	"net/http"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// workersData is the workers page's data; its JSON is `jobs workers --json`'s.
type workersData struct {
	Workers []*queue.Process `json:"workers"`
	Now     time.Time        `json:"-"` // Redis's time: running jobs' elapsed time is by it
}

func (h *Handler) workersPage(w http.ResponseWriter, r *http.Request) {
	ps, err := h.client.Processes(r.Context())
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	now, err := h.redisNow(r.Context())
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	if ps == nil {
		ps = []*queue.Process{}
	}
	h.render(w, r, "workers", "Workers", workersData{Workers: ps, Now: now}, nil)
}

// auditData is the audit page's data: the latest actions, newest first.
type auditData struct {
	Entries []queue.AuditEntry `json:"entries"`
	Next    string             `json:"next"` // the cursor of older entries; "" at the end
	NextURL string             `json:"-"`
}

func (h *Handler) auditPage(w http.ResponseWriter, r *http.Request) {
	before := r.URL.Query().Get("before")
	es, err := h.client.AuditLog(r.Context(), before, h.opts.PageSize)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	d := auditData{Entries: es}
	if d.Entries == nil {
		d.Entries = []queue.AuditEntry{}
	}
	if len(es) == h.opts.PageSize {
		d.Next = es[len(es)-1].ID
		d.NextURL = h.opts.BasePath + "/audit?before=" + d.Next
	}
	h.render(w, r, "audit", "Audit log", d, nil)
}
