package dash

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/queue"
)

// cronRow is one cron entry on the cron page: as `jobs cron ls --json`, with its last
// job's state and whether a tick was missed.
type cronRow struct {
	cron.Listed
	LastJobState queue.State `json:"last_job_state"` // "" when unknown or gone
	Words        string      `json:"words"`          // the spec in words (cron.Describe); "" when not put in words
	// Missed: a tick after the last one recorded is past (by more than a minute), so no
	// scheduler fired it (none ran, or all were quiet).
	Missed bool `json:"missed"`
}

type cronData struct {
	Entries []cronRow `json:"entries"`
	Error   string    `json:"error"` // entries that could not be read, named
	// The add form: what was sent, and why it was refused (shown beside it).
	Form      cronForm `json:"-"`
	FormError string   `json:"-"`
	FormField string   `json:"-"` // the field the error is about, when one is
}

func (h *Handler) cronPage(w http.ResponseWriter, r *http.Request) {
	d, err := h.cronListing(r)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	h.render(w, r, "cron", "Cron", d, nil)
}

// cronListing reads the cron page's entries, with their last job's state.
func (h *Handler) cronListing(r *http.Request) (cronData, error) {
	ctx := r.Context()
	now, err := h.redisNow(ctx)
	if err != nil {
		return cronData{}, err
	}
	rows, listErr := cron.NewStore(h.client).Listing(ctx, now)
	if rows == nil && listErr != nil {
		return cronData{}, listErr
	}
	d := cronData{Entries: make([]cronRow, 0, len(rows))}
	if listErr != nil {
		d.Error = listErr.Error()
	}
	for _, l := range rows {
		row := cronRow{Listed: l, Words: cron.Describe(l.Spec)}
		if l.LastTick != nil {
			if next := l.Next(*l.LastTick); !next.IsZero() && now.Sub(next) > time.Minute {
				row.Missed = true
			}
			if l.LastJob != "" {
				if j, err := h.client.Get(ctx, queueOr(l.Queue), l.LastJob); err == nil {
					row.LastJobState = j.State
				}
			}
		}
		d.Entries = append(d.Entries, row)
	}
	return d, nil
}

func queueOr(q string) string {
	if q == "" {
		return "default"
	}
	return q
}

// cronForm is the cron page's add form, as sent: the fields of `jobs cron add`.
type cronForm struct {
	Name, Spec, Type, Payload, Queue, MaxRetry, Timeout string
	Exclusive, CatchUp                                  bool
}

// entry turns the form into a cron entry, naming the field a malformed number or
// duration is in.
func (f cronForm) entry() (cron.Entry, string, error) {
	e := cron.Entry{Name: f.Name, Spec: f.Spec, Type: f.Type, Payload: f.Payload, Queue: f.Queue,
		Exclusive: f.Exclusive, CatchUp: f.CatchUp}
	if f.MaxRetry != "" {
		n, err := strconv.Atoi(f.MaxRetry)
		if err != nil {
			return e, "max_retry", fmt.Errorf("max retry %q: want a whole number", f.MaxRetry)
		}
		e.MaxRetry = &n
	}
	if f.Timeout != "" {
		d, err := time.ParseDuration(f.Timeout)
		if err != nil || d <= 0 {
			return e, "timeout", fmt.Errorf("timeout %q: want a positive duration such as 30s or 5m", f.Timeout)
		}
		e.Timeout = d
	}
	return e, "", nil
}

// cronAdd adds or replaces a dynamic cron entry from the cron page's form, by the rules
// of `jobs cron add`: an entry refused (its spec, name, type, or the job it would enqueue)
// is shown again with why, beside the form, as a 400.
func (h *Handler) cronAdd(w http.ResponseWriter, r *http.Request) {
	f := cronForm{Name: strings.TrimSpace(r.PostFormValue("name")), Spec: strings.TrimSpace(r.PostFormValue("spec")),
		Type: strings.TrimSpace(r.PostFormValue("type")), Payload: r.PostFormValue("payload"),
		Queue: strings.TrimSpace(r.PostFormValue("queue")), MaxRetry: strings.TrimSpace(r.PostFormValue("max_retry")),
		Timeout: strings.TrimSpace(r.PostFormValue("timeout")), Exclusive: r.PostFormValue("exclusive") != "",
		CatchUp: r.PostFormValue("catch_up") != ""}
	e, field, err := f.entry()
	if err == nil {
		err = e.Validate()
	}
	if err == nil {
		err = cron.NewStore(h.client).Add(r.Context(), e)
		if err != nil && !errors.Is(err, cron.ErrInvalid) {
			h.audit(r, queue.AuditEntry{Action: "cron-add", Target: f.Name}, err)
			h.failQueue(w, r, err)
			return
		}
	}
	if err != nil {
		if wantsJSON(r) {
			h.fail(w, r, http.StatusBadRequest, err)
			return
		}
		d, lerr := h.cronListing(r)
		if lerr != nil {
			h.failQueue(w, r, lerr)
			return
		}
		d.Form, d.FormError, d.FormField = f, err.Error(), field
		h.page(w, r, http.StatusBadRequest, "cron", "Cron", d)
		return
	}
	a := queue.AuditEntry{Action: "cron-add", Target: f.Name, Count: 1}
	h.audit(r, a, nil)
	h.done(w, r, a, h.opts.BasePath+"/cron")
}
