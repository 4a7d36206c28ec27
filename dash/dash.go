// Package dash is the web dashboard of jobs: an http.Handler that shows queues, jobs,
// workers and the audit log, and lets an operator retry, cancel, delete, pause, resume
// and purge. Mount it in any Go server, or run it with `jobs dash`.
//
// Pages are rendered on the server with html/template and read without JavaScript; every
// GET also answers `Accept: application/json` with the data the CLI's --json prints.
// Safe by default: a strict Content-Security-Policy (no inline script or style),
// nosniff, frame denial, cross-origin POSTs refused (http.CrossOriginProtection),
// actions only as POST form bodies, Options.ReadOnly enforced by every handler that
// changes state, and everything users wrote shown as text.
package dash

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

// Defaults of Options.
const (
	// DefaultTimeout bounds the Redis reads and writes of one request.
	DefaultTimeout = 5 * time.Second
	// DefaultPageSize is how many jobs a list page shows.
	DefaultPageSize = 50
	// DefaultScanLimit is how many jobs a filtered list reads per request at most.
	DefaultScanLimit = 2000
	// DefaultConfirmAbove is the count above which a purge asks for the queue's name, and
	// an action on every match of a filter for the count (or the name).
	DefaultConfirmAbove = 100
	// DefaultCountLimit is how many jobs the count before an action on every match of a
	// filter reads at most.
	DefaultCountLimit = 20000
	// DefaultSnapshotEvery is how long the overview's metrics history is shared between
	// requests before it is read again (workers flush it about every 10 s anyway).
	DefaultSnapshotEvery = 10 * time.Second
)

// Options configure a dashboard. The zero value is a writable dashboard open to anyone
// who can reach it: set Authorize (see BasicAuth) before exposing it beyond loopback.
type Options struct {
	// ReadOnly refuses every action (403): the pages show, nothing changes.
	ReadOnly bool
	// Authorize admits a request and names its user (written to the audit log), or
	// refuses it (401). Nil admits every request, the user being its remote address.
	Authorize func(r *http.Request) (user string, ok bool)
	// BasePath is the path the dashboard is mounted under ("/admin/jobs"; "" for the
	// root): links are built under it, and requests outside it are 404. Default: "".
	BasePath string
	// Logger receives one line per action (and per failed request). Default: slog.Default().
	Logger *slog.Logger
	// Timeout bounds each request's Redis calls. Default: DefaultTimeout (5s).
	Timeout time.Duration
	// PageSize is how many jobs a list page shows (1 to queue.MaxPage). Default: 50.
	PageSize int
	// ScanLimit is how many jobs a filtered list reads per request before it stops and
	// offers to continue. Default: DefaultScanLimit (2000).
	ScanLimit int
	// ConfirmAbove: a purge of more jobs than this asks the operator to type the queue's
	// name, and an action on more matches of a filter than this, their count (or the
	// name). Default: 100.
	ConfirmAbove int
	// CountLimit is how many jobs the count shown before an action on every match of a
	// filter reads at most; past it, the count is an upper bound (the matches read plus
	// the jobs not read). Default: DefaultCountLimit (20,000).
	CountLimit int
	// SnapshotEvery: the overview's metrics history is read at most once per this period
	// and shared by every request. Default: 10s.
	SnapshotEvery time.Duration
	// LiveEvery: while any tab listens to /live, the queues' counts are read once per
	// this period and sent to all of them. Default: DefaultLiveEvery (2s).
	LiveEvery time.Duration
}

func (o Options) withDefaults() Options {
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	o.PageSize = cmp.Or(o.PageSize, DefaultPageSize)
	o.ScanLimit = cmp.Or(o.ScanLimit, DefaultScanLimit)
	o.ConfirmAbove = cmp.Or(o.ConfirmAbove, DefaultConfirmAbove)
	o.CountLimit = cmp.Or(o.CountLimit, DefaultCountLimit)
	o.SnapshotEvery = cmp.Or(o.SnapshotEvery, DefaultSnapshotEvery)
	o.LiveEvery = cmp.Or(o.LiveEvery, DefaultLiveEvery)
	return o
}

func (o Options) validate() error {
	switch {
	case o.BasePath != "" && (!strings.HasPrefix(o.BasePath, "/") || strings.HasSuffix(o.BasePath, "/")):
		return fmt.Errorf("dash: BasePath %q: want \"\" or a path starting with / and not ending with /", o.BasePath)
	case strings.ContainsAny(o.BasePath, "?#\"'<> \\"):
		return fmt.Errorf("dash: BasePath %q: holds a character a URL path cannot", o.BasePath)
	case o.Timeout < 0:
		return fmt.Errorf("dash: Timeout %s: must not be negative", o.Timeout)
	case o.PageSize < 0 || o.PageSize > queue.MaxPage:
		return fmt.Errorf("dash: PageSize %d: want 1 to %d", o.PageSize, queue.MaxPage)
	case o.ScanLimit < 0:
		return fmt.Errorf("dash: ScanLimit %d: must not be negative", o.ScanLimit)
	case o.ConfirmAbove < 0:
		return fmt.Errorf("dash: ConfirmAbove %d: must not be negative", o.ConfirmAbove)
	case o.CountLimit < 0:
		return fmt.Errorf("dash: CountLimit %d: must not be negative", o.CountLimit)
	case o.SnapshotEvery < 0:
		return fmt.Errorf("dash: SnapshotEvery %s: must not be negative", o.SnapshotEvery)
	case o.LiveEvery < 0:
		return fmt.Errorf("dash: LiveEvery %s: must not be negative", o.LiveEvery)
	}
	return nil
}

// Handler is a dashboard: an http.Handler.
type Handler struct {
	client *queue.Client
	opts   Options
	pages  *pages
	routes http.Handler // the routes behind authorization and CSRF protection

	mu      sync.Mutex // guards snap and reading
	snap    *snapshot  // the overview's shared metrics history
	reading bool       // a background read of snap is under way
	hub     *liveHub   // the live stream's shared snapshots

	// hostNow is this server's clock, used only for what is this server's own business
	// (how old its cached snapshots are). Every judgement of a job's or a process's age
	// is by Redis's clock (redisNow), which stamped them: a dashboard host whose clock is
	// off must not show wrong ages. A field so that tests can skew it.
	hostNow func() time.Time
	key     [32]byte // signs the counts confirmed before an action on every match (see matching.go)
}

var _ http.Handler = (*Handler)(nil)

// New returns a dashboard of client's queues.
func New(client *queue.Client, opts Options) (*Handler, error) {
	if client == nil {
		return nil, errors.New("dash: nil queue.Client")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	p, err := loadPages()
	if err != nil {
		return nil, err
	}
	h := &Handler{client: client, opts: opts.withDefaults(), pages: p, hostNow: time.Now}
	if _, err := rand.Read(h.key[:]); err != nil {
		return nil, fmt.Errorf("dash: %w", err)
	}
	h.hub = &liveHub{h: h, every: h.opts.LiveEvery, subs: map[chan []byte]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.overview)
	mux.HandleFunc("GET /queues/{queue}", h.queuePage)
	mux.HandleFunc("GET /queues/{queue}/purge", h.purgeConfirm)
	mux.HandleFunc("GET /queues/{queue}/matching", h.matchingCount)
	mux.HandleFunc("GET /jobs/{id}", h.jobPage)
	mux.HandleFunc("GET /batches/{id}", h.batchPage)
	mux.HandleFunc("GET /workers", h.workersPage)
	mux.HandleFunc("GET /audit", h.auditPage)
	mux.HandleFunc("GET /events", h.eventsPage)
	mux.HandleFunc("GET /cron", h.cronPage)
	mux.HandleFunc("GET /live", h.live)
	mux.Handle("GET /static/", http.StripPrefix("/static/", staticHandler()))
	// Every state change, each behind the same read-only check (see action).
	for _, a := range jobActions {
		mux.HandleFunc("POST /jobs/{id}/"+a, h.action(h.jobAction))
	}
	for _, a := range queueActions {
		mux.HandleFunc("POST /queues/{queue}/"+a, h.action(h.queueAction))
	}
	for _, a := range workerActions {
		mux.HandleFunc("POST /workers/{id}/"+a, h.action(h.workerAction))
	}
	mux.HandleFunc("POST /cron", h.action(h.cronAdd))
	for _, a := range cronActions {
		mux.HandleFunc("POST /cron/{name}/"+a, h.action(h.cronAction))
	}
	for _, p := range []string{"/jobs/{id}/{action}", "/queues/{queue}/{action}", "/workers/{id}/{action}",
		"/cron/{name}/{action}"} {
		mux.HandleFunc("GET "+p, h.postOnly)
	}
	mux.HandleFunc("/", h.notFound)
	// Browsers mark cross-site requests (Sec-Fetch-Site, Origin): a page elsewhere cannot
	// make a logged-in operator's browser press our buttons.
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusForbidden, errors.New("cross-origin request refused"))
	}))
	h.routes = csrf.Handler(mux)
	return h, nil
}

// ServeHTTP sets the security headers, strips BasePath, authorizes, then routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	if h.opts.BasePath != "" {
		rest, ok := strings.CutPrefix(r.URL.Path, h.opts.BasePath)
		if !ok || (rest != "" && rest[0] != '/') {
			http.NotFound(w, r)
			return
		}
		if rest == "" {
			http.Redirect(w, r, h.opts.BasePath+"/", http.StatusMovedPermanently)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path = rest
		u.RawPath = ""
		if rp, ok := strings.CutPrefix(r.URL.RawPath, h.opts.BasePath); ok {
			u.RawPath = rp
		}
		r2.URL = &u
		r = r2
	}
	// Without a user, the client's address names who acted: its host, not the ephemeral
	// port, which says nothing and makes each request of one person look like another's.
	user := r.RemoteAddr
	if host, _, err := net.SplitHostPort(user); err == nil {
		user = host
	}
	if h.opts.Authorize != nil {
		name, ok := h.opts.Authorize(r)
		if !ok {
			hd.Set("WWW-Authenticate", `Basic realm="jobs", charset="UTF-8"`)
			h.fail(w, r, http.StatusUnauthorized, errors.New("authentication required"))
			return
		}
		user = cmp.Or(name, user)
	}
	ctx := context.WithValue(r.Context(), userKey{}, user)
	if r.URL.Path != "/live" { // the stream lasts while its tab is open; its reads have their own timeout
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.opts.Timeout)
		defer cancel()
	}
	h.routes.ServeHTTP(w, r.WithContext(ctx))
}

type userKey struct{}

// userOf is who made the request: the authorized user, else the client's address.
func userOf(r *http.Request) string {
	u, _ := r.Context().Value(userKey{}).(string)
	return u
}

// BasicAuth returns an Options.Authorize that admits requests carrying HTTP basic auth
// with this user and password. Both are compared in constant time (their SHA-256 sums,
// so neither's length leaks either). With an empty user or password it admits nobody:
// a password read from an unset environment variable must not open the dashboard to
// anyone who sends an empty one.
func BasicAuth(user, password string) func(*http.Request) (string, bool) {
	wantU, wantP := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	unset := user == "" || password == ""
	return func(r *http.Request) (string, bool) {
		u, p, ok := r.BasicAuth()
		if !ok || unset {
			return "", false
		}
		gotU, gotP := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		okU := subtle.ConstantTimeCompare(gotU[:], wantU[:])
		okP := subtle.ConstantTimeCompare(gotP[:], wantP[:])
		if okU&okP != 1 {
			return "", false
		}
		return u, true
	}
}

// action wraps every handler that changes state: refused in read-only mode, whatever
// the page showed.
func (h *Handler) action(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.ReadOnly {
			h.fail(w, r, http.StatusForbidden, errors.New("the dashboard is read-only"))
			return
		}
		// Form bodies only, as the pages send: a text/plain or multipart POST (which a
		// cross-site form can also send) is refused before it acts, whatever its fields.
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
			h.fail(w, r, http.StatusUnsupportedMediaType, errors.New("actions take form bodies (Content-Type: application/x-www-form-urlencoded)"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("form: %v", err))
			return
		}
		next(w, r)
	}
}

// redisNow is Redis's time (TIME): what ages, "for how long" and "late" are judged by.
func (h *Handler) redisNow(ctx context.Context) (time.Time, error) {
	now, err := broker.Of(h.client).Redis().Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("time: %w", err)
	}
	return now, nil
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, http.StatusNotFound, fmt.Errorf("no page %s", r.URL.Path))
}

func (h *Handler) postOnly(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST")
	h.fail(w, r, http.StatusMethodNotAllowed, errors.New("actions are POST forms only"))
}
