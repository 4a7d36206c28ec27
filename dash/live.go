package dash

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jobs-dev/jobs/internal/printable"
	"github.com/jobs-dev/jobs/queue"
)

// DefaultLiveEvery is how often the live stream (/live) reads the queues' counts.
const DefaultLiveEvery = 2 * time.Second

// liveHub reads the queues' counts once per tick while anyone listens and sends that one
// snapshot to every open tab: N tabs never multiply the load on Redis. It reads nothing
// while no tab listens (a hidden tab closes its stream).
type liveHub struct {
	h     *Handler
	every time.Duration

	mu    sync.Mutex
	subs  map[chan []byte]struct{}
	last  []byte // the latest frame, sent at once to a new listener
	on    bool   // the ticking goroutine runs
	reads int    // snapshots read so far (tests check the sharing)
}

// subscribe adds a listener; its channel gets each frame: an SSE event, "stats" (a
// snapshot) or "down" (the counts could not be read: the page says its figures are
// stale), whole. A slow listener misses some.
func (l *liveHub) subscribe() (chan []byte, func()) {
	ch := make(chan []byte, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs[ch] = struct{}{}
	if l.last != nil {
		ch <- l.last
	}
	if !l.on {
		l.on = true
		go l.run()
	}
	return ch, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.subs, ch)
	}
}

// run reads and broadcasts a snapshot every tick until no listener is left.
func (l *liveHub) run() {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		l.mu.Lock()
		if len(l.subs) == 0 {
			l.on, l.last = false, nil
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		snap := l.read()
		l.mu.Lock()
		l.last = snap
		for ch := range l.subs {
			select {
			case ch <- snap:
			default: // still holds the previous one: it gets this one next tick
			}
		}
		l.mu.Unlock()
		<-t.C
	}
}

// liveData is one snapshot of /live: the queues as `jobs stats --json` prints them.
type liveData struct {
	Queues []queue.QueueStats `json:"queues"`
	At     time.Time          `json:"at"`
}

// liveDown is the "down" event's data: why the counts could not be read.
type liveDown struct {
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// read reads one snapshot and returns its frame, or a "down" frame saying why not: a tab
// must not go on showing its last counts as if they were live.
func (l *liveHub) read() []byte {
	ctx, cancel := context.WithTimeout(context.Background(), l.h.opts.Timeout)
	defer cancel()
	stats, err := l.h.client.Stats(ctx)
	l.mu.Lock()
	l.reads++
	l.mu.Unlock()
	if err != nil {
		l.h.opts.Logger.Warn("dash: live counts not read", "err", err)
		b, _ := json.Marshal(liveDown{Error: printable.Escape(err.Error(), false), At: l.h.hostNow().UTC()})
		return fmt.Appendf(nil, "event: down\ndata: %s\n\n", b)
	}
	if stats == nil {
		stats = []queue.QueueStats{}
	}
	b, _ := json.Marshal(liveData{Queues: stats, At: l.h.hostNow().UTC()})
	return fmt.Appendf(nil, "event: stats\ndata: %s\n\n", b)
}

// live streams the shared snapshots as server-sent events ("stats"), until the client
// goes or the request's context ends. It is the one route without the request timeout,
// and it never goes idle: a server that mounts the dashboard should end its requests'
// contexts when it stops (http.Server.BaseContext), or Shutdown waits for these streams.
func (h *Handler) live(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		h.fail(w, r, http.StatusInternalServerError, fmt.Errorf("streaming unsupported by this server"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", h.hub.every.Milliseconds())
	fl.Flush()
	ch, stop := h.hub.subscribe()
	defer stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-ch:
			if _, err := w.Write(b); err != nil {
				return
			}
			fl.Flush()
		}
	}
}
