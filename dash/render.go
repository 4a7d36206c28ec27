package dash

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/jobs-dev/jobs/internal/printable"
	"github.com/jobs-dev/jobs/queue"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// pages holds one parsed template set per page (the layout plus the page).
type pages struct {
	byName map[string]*template.Template
	// vendor lists the vendored scripts and style sheets under static/vendor (a chart
	// library), linked from every page when present.
	vendorJS, vendorCSS []string
}

func loadPages() (*pages, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("dash: templates: %w", err)
	}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dash: templates: %w", err)
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFiles, n)
		if err != nil {
			return nil, fmt.Errorf("dash: template %s: %w", base, err)
		}
		p.byName[strings.TrimSuffix(base, ".html")] = t
	}
	_ = fs.WalkDir(staticFiles, "static/vendor", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel := strings.TrimPrefix(name, "static/")
		switch path.Ext(name) {
		case ".js":
			p.vendorJS = append(p.vendorJS, rel)
		case ".css":
			p.vendorCSS = append(p.vendorCSS, rel)
		}
		return nil
	})
	slices.Sort(p.vendorJS)
	slices.Sort(p.vendorCSS)
	return p, nil
}

func staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFiles, "static")
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "" { // no directory listings
			http.NotFound(w, r)
			return
		}
		if ct := mime.TypeByExtension(path.Ext(r.URL.Path)); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

// view is what every page template gets: the layout's fields, and the page's data.
type view struct {
	Title    string
	Base     string // BasePath
	ReadOnly bool
	User     string
	Nav      string // the section the page is in: overview, workers, audit
	Notice   string // the outcome of the action that led here, if any
	JS, CSS  []string
	Data     any
}

// wantsJSON reports whether the client asked for JSON (Accept: application/json).
func wantsJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "application/json") {
			return true
		}
	}
	return false
}

// render answers a GET: data as JSON when asked for, else the named page around page
// (the template's data; data itself when nil).
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name, title string, data, page any) {
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, data)
		return
	}
	if page == nil {
		page = data
	}
	h.page(w, r, http.StatusOK, name, title, page)
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	t := h.pages.byName[name]
	v := view{Title: title, Base: h.opts.BasePath, ReadOnly: h.opts.ReadOnly, User: userOf(r), Nav: name,
		Notice: notices[r.URL.Query().Get("done")], JS: h.pages.vendorJS, CSS: h.pages.vendorCSS, Data: data}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		h.opts.Logger.ErrorContext(r.Context(), "dash: render", "page", name, "err", err)
		http.Error(w, "dash: cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"cannot encode the reply"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// fail answers with err as one line: {"error": "..."} for JSON clients, else an error page.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	msg := err.Error()
	if status >= 500 {
		h.opts.Logger.WarnContext(r.Context(), "dash: request failed", "method", r.Method, "path", r.URL.Path, "err", msg)
	}
	if wantsJSON(r) || h.pages == nil {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	h.page(w, r, status, "error", http.StatusText(status), struct {
		Status int
		Text   string
		Msg    string
	}{status, http.StatusText(status), msg})
}

// failQueue maps an error of a queue call to its status.
func (h *Handler) failQueue(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, queue.ErrInvalid):
		h.fail(w, r, http.StatusBadRequest, err)
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrNoProcess):
		h.fail(w, r, http.StatusNotFound, err)
	case errors.Is(err, queue.ErrState), errors.Is(err, queue.ErrDuplicate):
		h.fail(w, r, http.StatusConflict, err)
	default:
		h.fail(w, r, http.StatusBadGateway, fmt.Errorf("redis: %w", err))
	}
}

// notices are the outcomes an action's redirect names (?done=...): a fixed set, so a
// link cannot make the page say anything else.
var notices = map[string]string{
	"retry": "Job made ready.", "run": "Job made ready to run now.", "cancel": "Job cancelled.",
	"delete": "Job deleted.", "pause": "Queue paused.", "resume": "Queue resumed.",
	"retry-dead": "Dead jobs made ready.", "purge": "Jobs purged.", "quiet": "Told to be quiet.",
	"stop": "Told to stop.", "selected-retry": "Selected jobs made ready.", "selected-run": "Selected jobs made ready.",
	"selected-cancel": "Selected jobs cancelled.", "selected-delete": "Selected jobs deleted.",
	"matching": "Done: every match was read.", "cron-trigger": "Cron job enqueued.", "cron-remove": "Cron entry removed.",
	"cron-add": "Cron entry added.",
}

// segment escapes s as one segment of a URL path: url.PathEscape, except that "." and
// "..", which a browser and the router resolve as the segment itself or its parent
// (/jobs/.. is the overview), are written %2E: a job or queue may be named so.
func segment(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

var funcs = template.FuncMap{
	"esc":     func(s string) string { return printable.Escape(s, false) },
	"escml":   func(s string) string { return printable.Escape(s, true) },
	"pathesc": segment,
	"literal": patternLiteral,
	"query":   url.QueryEscape,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"iso": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	},
	"dur":        roundDur,
	"runs":       func(maxRetry int) int { return maxRetry + 1 }, // the most attempts a job gets
	"actionsFor": jobActionsFor,
	"minute":     func(unix int64) string { return time.Unix(unix, 0).UTC().Format("15:04") },
	"bytes":      humanBytes,
	"states":     func() []queue.State { return states },
	"summary": func(s string) string {
		return printable.Escape(cut(firstLine(s), 120), false)
	},
}

// states in the order of the queue page's tabs.
var states = []queue.State{queue.StateWaiting, queue.StateReady, queue.StateScheduled, queue.StateActive, queue.StateRetry,
	queue.StateDead, queue.StateDone}

func roundDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// cut keeps s to at most n bytes on a rune boundary, marking a cut with "...".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - 3
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "..."
}

// patternLiteral escapes s for an input's pattern attribute (a JavaScript regular
// expression, compiled with the v flag) so that it matches s itself: a queue name's "."
// must not match any character.
func patternLiteral(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`^$\.*+?()[]{}|/`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
