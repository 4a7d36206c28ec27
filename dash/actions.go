package dash

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/queue"
)

// The actions, each a POST of a form (see New): per job, per queue, per process.
var (
	jobActions    = []string{"retry", "run", "cancel", "delete"}
	queueActions  = []string{"pause", "resume", "retry-dead", "purge", "selected", "matching"}
	workerActions = []string{"quiet", "stop"}
	cronActions   = []string{"trigger", "remove"}
)

// actionName is the last segment of the request's path: the action.
func actionName(r *http.Request) string {
	p := r.URL.Path
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// done answers a successful action: JSON {"ok":true,...} when asked for, else a redirect
// (303) to the page that shows the result.
func (h *Handler) done(w http.ResponseWriter, r *http.Request, e queue.AuditEntry, to string) {
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "action": e.Action, "queue": e.Queue,
			"target": e.Target, "count": e.Count})
		return
	}
	sep := "?"
	if u, err := url.Parse(to); err == nil && u.RawQuery != "" {
		sep = "&"
	}
	http.Redirect(w, r, to+sep+"done="+url.QueryEscape(e.Action), http.StatusSeeOther)
}

// audit logs an action (slog, and the audit log in Redis) whatever its outcome.
func (h *Handler) audit(r *http.Request, e queue.AuditEntry, err error) {
	e.Who = userOf(r)
	if err != nil {
		e.Detail = err.Error()
	}
	attrs := []slog.Attr{slog.String("who", e.Who), slog.String("action", e.Action), slog.String("queue", e.Queue),
		slog.String("target", e.Target), slog.Int("count", e.Count)}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("err", e.Detail))
	}
	h.opts.Logger.LogAttrs(r.Context(), level, "dash: action", attrs...)
	if aerr := h.client.Audit(r.Context(), e); aerr != nil {
		h.opts.Logger.ErrorContext(r.Context(), "dash: audit log not written", "action", e.Action, "err", aerr)
	}
}

func (h *Handler) jobAction(w http.ResponseWriter, r *http.Request) {
	id, q, act := r.PathValue("id"), r.PostFormValue("queue"), actionName(r)
	if err := queue.ValidateQueue(q); err != nil {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("form field queue: %w", err))
		return
	}
	ctx := r.Context()
	err := h.runJobAction(ctx, act, q, id)
	e := queue.AuditEntry{Action: act, Queue: q, Target: id}
	if err == nil {
		e.Count = 1
	}
	h.audit(r, e, err)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	to := h.opts.BasePath + "/jobs/" + segment(id) + "?queue=" + url.QueryEscape(q)
	if act == "delete" {
		to = h.opts.BasePath + "/queues/" + segment(q)
	}
	h.done(w, r, e, to)
}

func (h *Handler) queueAction(w http.ResponseWriter, r *http.Request) {
	q, act := r.PathValue("queue"), actionName(r)
	if err := queue.ValidateQueue(q); err != nil {
		h.failQueue(w, r, err)
		return
	}
	ctx := r.Context()
	// As jobs pause does: a pause of a queue no job was ever enqueued on (a typo in a
	// hand-written URL) would write its paused key and answer as if it had worked.
	qs, err := h.client.Queues(ctx)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	if !slices.Contains(qs, q) {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no queue %q (no job was ever enqueued on it)", q))
		return
	}
	e := queue.AuditEntry{Action: act, Queue: q}
	switch act {
	case "pause":
		err = h.client.Pause(ctx, q)
	case "resume":
		err = h.client.Resume(ctx, q)
	case "retry-dead":
		e.Count, err = h.client.RetryAllDead(ctx, q)
	case "matching":
		h.matchingAction(w, r, q) // audits each batch itself
		return
	case "selected":
		n, target, serr := h.selected(r, q)
		if serr != nil && n == 0 && target == "" {
			h.fail(w, r, http.StatusBadRequest, serr)
			return
		}
		e.Action, e.Target, e.Count, err = "selected-"+r.PostFormValue("do"), target, n, serr
	case "purge":
		st, perr := h.purgeState(r, q)
		if perr != nil {
			h.fail(w, r, http.StatusBadRequest, perr)
			return
		}
		e.Target = string(st)
		e.Count, err = h.client.Purge(ctx, q, st)
	}
	h.audit(r, e, err)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	h.done(w, r, e, h.opts.BasePath+"/queues/"+segment(q))
}

// purgeState checks a purge's form: a state that can be purged, and above
// Options.ConfirmAbove jobs, the queue's name typed in confirm.
func (h *Handler) purgeState(r *http.Request, q string) (queue.State, error) {
	st, err := queue.ParseState(r.PostFormValue("state"))
	if err != nil {
		return "", fmt.Errorf("form field state: %w", err)
	}
	if st == queue.StateActive {
		return "", errors.New("active jobs cannot be purged: cancel them")
	}
	n, err := h.count(r, q, st)
	if err != nil {
		return "", err
	}
	if n > int64(h.opts.ConfirmAbove) && r.PostFormValue("confirm") != q {
		return "", fmt.Errorf("purging %d %s jobs needs the queue's name typed in the confirm field", n, st)
	}
	return st, nil
}

// count is how many jobs of q are in st now.
func (h *Handler) count(r *http.Request, q string, st queue.State) (int64, error) {
	s, err := h.client.StatsOf(r.Context(), q)
	if err != nil {
		return 0, err
	}
	return map[queue.State]int64{queue.StateReady: s[0].Ready, queue.StateScheduled: s[0].Scheduled,
		queue.StateActive: s[0].Active, queue.StateRetry: s[0].Retry, queue.StateDead: s[0].Dead,
		queue.StateDone: s[0].Done}[st], nil
}

// purgeData is the purge confirmation page's data.
type purgeData struct {
	Queue   string      `json:"queue"`
	State   queue.State `json:"state"`
	Count   int64       `json:"count"`
	Confirm bool        `json:"confirm"` // the queue's name must be typed
}

func (h *Handler) purgeConfirm(w http.ResponseWriter, r *http.Request) {
	q := r.PathValue("queue")
	if err := queue.ValidateQueue(q); err != nil {
		h.failQueue(w, r, err)
		return
	}
	st, err := queue.ParseState(r.URL.Query().Get("state"))
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	if st == queue.StateActive {
		h.fail(w, r, http.StatusBadRequest, errors.New("active jobs cannot be purged: cancel them"))
		return
	}
	n, err := h.count(r, q, st)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	d := purgeData{Queue: q, State: st, Count: n, Confirm: n > int64(h.opts.ConfirmAbove)}
	h.render(w, r, "purge", "Purge "+strconv.FormatInt(n, 10)+" "+string(st)+" jobs", d, nil)
}

func (h *Handler) workerAction(w http.ResponseWriter, r *http.Request) {
	id, act := r.PathValue("id"), actionName(r)
	var err error
	if act == "quiet" {
		err = h.client.Quiet(r.Context(), id)
	} else {
		err = h.client.Stop(r.Context(), id)
	}
	e := queue.AuditEntry{Action: act, Target: id}
	if err == nil {
		e.Count = 1
	}
	h.audit(r, e, err)
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	h.done(w, r, e, h.opts.BasePath+"/workers")
}

// cronAction triggers a dynamic cron entry now, or removes it.
func (h *Handler) cronAction(w http.ResponseWriter, r *http.Request) {
	name, act := r.PathValue("name"), actionName(r)
	store := cron.NewStore(h.client)
	e := queue.AuditEntry{Action: "cron-" + act, Target: name}
	var err error
	if act == "trigger" {
		var now time.Time
		if now, err = h.redisNow(r.Context()); err == nil {
			var id string
			id, err = store.Trigger(r.Context(), name, now)
			e.Detail = id
		}
	} else {
		err = store.Remove(r.Context(), name)
	}
	if err == nil {
		e.Count = 1
	}
	h.audit(r, e, err)
	switch {
	case errors.Is(err, cron.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, err)
	case errors.Is(err, queue.ErrDuplicate):
		h.fail(w, r, http.StatusConflict, fmt.Errorf("%w: this second's tick is already enqueued", err))
	case err != nil:
		h.failQueue(w, r, err)
	default:
		h.done(w, r, e, h.opts.BasePath+"/cron")
	}
}

// selected applies one action (form field do: retry, run, cancel or delete) to the jobs
// checked on a list page (form fields id, at most queue.MaxPage), one script call each.
// It returns how many it changed, the IDs as the audit log's target, and the first error
// with how many failed.
func (h *Handler) selected(r *http.Request, q string) (int, string, error) {
	do, ids := r.PostFormValue("do"), r.PostForm["id"]
	// An ID sent twice is acted on once: its second call would fail on the state the
	// first left, and report a failure for an action that was done.
	seen := make(map[string]bool, len(ids))
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
		dup := seen[id]
		seen[id] = true
		return dup
	})
	if !slices.Contains(jobActions, do) {
		return 0, "", fmt.Errorf("form field do %q: want one of %s", do, strings.Join(jobActions, ", "))
	}
	if len(ids) == 0 || len(ids) > queue.MaxPage {
		return 0, "", fmt.Errorf("form field id: want 1 to %d job IDs, got %d", queue.MaxPage, len(ids))
	}
	ctx := r.Context()
	n, failed := 0, 0
	var first error
	for _, id := range ids {
		err := h.runJobAction(ctx, do, q, id)
		if err != nil {
			failed++
			first = cmp.Or(first, err)
			continue
		}
		n++
	}
	target := cut(strings.Join(ids, ","), 500)
	if first != nil {
		return n, target, fmt.Errorf("%d of %d failed, the first: %w", failed, len(ids), first)
	}
	return n, target, nil
}

// runJobAction runs one of jobActions on the job id of queue q: the one place the page's,
// the selection's and the filter's actions become Client calls.
func (h *Handler) runJobAction(ctx context.Context, act, q, id string) error {
	switch act {
	case "retry", "run":
		return h.client.Retry(ctx, q, id)
	case "cancel":
		_, err := h.client.Cancel(ctx, q, id)
		return err
	case "delete":
		return h.client.Delete(ctx, q, id)
	}
	return fmt.Errorf("unknown action %q", act)
}
