package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// Mux routes jobs to handlers by job type. For a job whose type has no handler it returns
// ErrNoHandler, which the worker does not count as a failure: it postpones the job so
// that a worker that has the handler runs it (see ErrNoHandler).
type Mux struct {
	mu sync.RWMutex
	m  map[string]Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{m: map[string]Handler{}} }

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
}

// HandleFunc registers f for jobs of type typ.
func (m *Mux) HandleFunc(typ string, f func(ctx context.Context, job *queue.Job) error) {
	m.Handle(typ, HandlerFunc(f))
}

// Types returns the registered job types.
func (m *Mux) Types() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	types := make([]string, 0, len(m.m))
	for t := range m.m {
		types = append(types, t)
	}
	return types
}

// Process runs the handler registered for job.Type.
func (m *Mux) Process(ctx context.Context, job *queue.Job) error {
	m.mu.RLock()
	h, ok := m.m[job.Type]
	m.mu.RUnlock()
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
