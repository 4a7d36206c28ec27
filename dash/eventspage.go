package dash

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

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

// eventNames are the names the filter takes: every event's (queue.EventNames).
var eventNames = func() []string {
	var s []string
	for _, n := range queue.EventNames {
		s = append(s, string(n))
	}
	return s
}()

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
