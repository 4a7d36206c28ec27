package dash

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/queue"
)

// eventsShown is the most events the events page shows.
const eventsShown = 200

// eventsData is the events page's data; its JSON holds the events as `jobs tail --json`
// prints them.
type eventsData struct {
	Queue  string        `json:"queue"`  // "" for every queue
	Event  string        `json:"event"`  // the event name filtered on, or ""
	Type   string        `json:"type"`   // text the job type contains, or ""
	Events []queue.Event `json:"events"` // newest first
	Queues []string      `json:"-"`
	Names  []string      `json:"-"`
}

var eventNames = []string{"enqueued", "scheduled", "started", "done", "retry", "dead", "reaped", "handed_back",
	"postponed", "cancelled", "requeued", "purged", "deleted", "paused", "resumed"}

// eventsPage shows the latest events: of one queue (its last 200 stream entries), or of
// every queue (the last few entries of each, so that 1,000 queues cost one bounded read).
func (h *Handler) eventsPage(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	d := eventsData{Queue: qv.Get("queue"), Event: qv.Get("event"), Type: qv.Get("type"), Names: eventNames}
	if d.Event != "" && !slices.Contains(eventNames, d.Event) {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("event %q: want one of %s", d.Event, strings.Join(eventNames, ", ")))
		return
	}
	if len(d.Type) > maxFilter {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("filter type: at most %d bytes", maxFilter))
		return
	}
	ctx := r.Context()
	qs, err := h.client.Queues(ctx)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	d.Queues = qs
	read, per := qs, max(1, eventsShown/max(len(qs), 1))
	if d.Queue != "" {
		if err := queue.ValidateQueue(d.Queue); err != nil {
			h.failQueue(w, r, err)
			return
		}
		read, per = []string{d.Queue}, eventsShown
	}
	evs, err := h.client.RecentEvents(ctx, read, per)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	d.Events = []queue.Event{}
	for _, e := range evs {
		if (d.Event == "" || string(e.Name) == d.Event) && (d.Type == "" || containsFold(e.Type, d.Type)) {
			d.Events = append(d.Events, e)
		}
		if len(d.Events) == eventsShown {
			break
		}
	}
	h.render(w, r, "events", "Events", d, nil)
}

// cronRow is one cron entry on the cron page: as `jobs cron ls --json`, with its last
// job's state and whether a tick was missed.
type cronRow struct {
	cron.Listed
	LastJobState queue.State `json:"last_job_state"` // "" when unknown or gone
	// Missed: a tick after the last one recorded is past (by more than a minute), so no
	// scheduler fired it (none ran, or all were quiet).
	Missed bool `json:"missed"`
}

type cronData struct {
	Entries []cronRow `json:"entries"`
	Error   string    `json:"error"` // entries that could not be read, named
}

func (h *Handler) cronPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now, err := h.redisNow(ctx)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	rows, listErr := cron.NewStore(h.client).Listing(ctx, now)
	if rows == nil && listErr != nil {
		h.failQueue(w, r, listErr)
		return
	}
	d := cronData{Entries: make([]cronRow, 0, len(rows))}
	if listErr != nil {
		d.Error = listErr.Error()
	}
	for _, l := range rows {
		row := cronRow{Listed: l}
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
	h.render(w, r, "cron", "Cron", d, nil)
}

func queueOr(q string) string {
	if q == "" {
		return "default"
	}
	return q
}
