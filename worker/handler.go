package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jobs-dev/jobs/queue"
)

// Handler runs one attempt of a job. Returning nil marks the job done; an error fails the
// attempt (retried with backoff while attempts remain), SkipRetry(err) sends it straight
// to the dead set. ctx is cancelled at the job's timeout, when the worker loses the job's
// lease, or when a stopping worker's shutdown timeout runs out: return promptly then.
// Delivery is at-least-once, so Process should be idempotent (job.ID helps).
type Handler interface {
	Process(ctx context.Context, job *queue.Job) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, job *queue.Job) error

// Process calls f(ctx, job).
func (f HandlerFunc) Process(ctx context.Context, job *queue.Job) error { return f(ctx, job) }

var (
	_ Handler = HandlerFunc(nil)
	_ Handler = (*Mux)(nil)
)

// Middleware wraps a Handler to run code around every job it handles: logging, a tenant's
// context, tracing, timing. Call next.Process to run the job; return its error, or one of
// your own. A panic in middleware is recovered like a handler's (the attempt fails).
type Middleware func(next Handler) Handler

// Mux routes jobs to handlers by job type, through its middleware (see Use). For a job
// whose type has no handler it returns ErrNoHandler, which the worker does not count as a
// failure: it postpones the job so that a worker that has the handler runs it (see
// ErrNoHandler).
type Mux struct {
	mu  sync.Mutex         // serialises Handle and Use
	m   map[string]Handler // as registered
	mws []Middleware
	// routes maps each type to its handler inside the middleware: rebuilt, copied, when
	// Handle or Use changes it, so Process, on every job of every slot, reads it without
	// a lock (an RWMutex's read lock alone cost several percent of throughput).
	routes atomic.Pointer[map[string]Handler]
}

// NewMux returns an empty Mux.
func NewMux() *Mux {
	m := &Mux{m: map[string]Handler{}}
	m.routes.Store(&map[string]Handler{})
	return m
}

// Handle registers h for jobs of type typ. Like http.ServeMux it panics on an empty type,
// a nil handler or a type registered twice: those are programming errors.
func (m *Mux) Handle(typ string, h Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if typ == "" || h == nil {
		panic("worker: Mux.Handle needs a job type and a handler")
	}
	if _, dup := m.m[typ]; dup {
		panic(fmt.Sprintf("worker: a handler for job type %q is already registered", typ))
	}
	m.m[typ] = h
	m.rebuild()
}

// HandleFunc registers f for jobs of type typ.
func (m *Mux) HandleFunc(typ string, f func(ctx context.Context, job *queue.Job) error) {
	m.Handle(typ, HandlerFunc(f))
}

// Use adds middleware around every handler of the Mux, those registered before and after
// the call alike. The first middleware given (in this call or an earlier one) is the
// outermost: with Use(a, b), a job runs a, then b, then its handler. Middleware runs only
// for jobs the Mux has a handler for: a job postponed for want of one (ErrNoHandler) did
// not run. It panics on a nil middleware.
func (m *Mux) Use(mws ...Middleware) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mw := range mws {
		if mw == nil {
			panic("worker: Mux.Use given a nil middleware")
		}
	}
	m.mws = append(m.mws, mws...)
	m.rebuild()
}

// rebuild makes the routes of every handler inside the middleware.
func (m *Mux) rebuild() {
	routes := make(map[string]Handler, len(m.m))
	for typ, h := range m.m {
		routes[typ] = m.wrap(h)
	}
	m.routes.Store(&routes)
}

// wrap puts h inside the middleware, the first outermost.
func (m *Mux) wrap(h Handler) Handler {
	for i := len(m.mws) - 1; i >= 0; i-- {
		h = m.mws[i](h)
		if h == nil {
			panic("worker: a middleware returned a nil Handler")
		}
	}
	return h
}

// Types returns the registered job types.
func (m *Mux) Types() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	types := make([]string, 0, len(m.m))
	for t := range m.m {
		types = append(types, t)
	}
	return types
}

// Process runs the handler registered for job.Type, inside the middleware.
func (m *Mux) Process(ctx context.Context, job *queue.Job) error {
	h, ok := (*m.routes.Load())[job.Type]
	if !ok {
		return fmt.Errorf("%w %q", ErrNoHandler, job.Type)
	}
	return h.Process(ctx, job)
}

// ErrNoHandler is what Mux returns for a job type it has no handler for; any Handler may
// return it (wrapped) too. The attempt is not counted as a failure, so no job dies
// because one worker of a mixed fleet (a rolling deploy, workers with different --run
// sets) lacks its handler while another has it: the job is postponed, unrun, about 200ms
// the first ten times it meets a worker without the handler, then 1s doubling to 5 min
// (Job.Postponed counts them), its last_error saying which worker lacked it, and the
// worker logs a warning (once a minute per type). A type that no worker handles thus
// waits, visible in `jobs ls`/`inspect` and the logs, until a handler is deployed or
// the job is cancelled.
var ErrNoHandler = errors.New("worker: no handler for job type")
