package worker

import (
	"context"
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

// Mux routes jobs to handlers by job type. A job whose type has no handler fails with an
// error saying so, and is retried and finally dead like any failure: nothing is lost
// while a deploy that adds the handler rolls out.
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
		return fmt.Errorf("no handler for job type %q on worker", job.Type)
	}
	return h.Process(ctx, job)
}

type resultKey struct{}

// SetResult stores data as the job's result, saved with the job when the attempt succeeds
// (`jobs inspect` shows it). Call it from a Handler with the ctx it was given; the last
// call wins. Outside a handler it does nothing.
func SetResult(ctx context.Context, data []byte) {
	if p, ok := ctx.Value(resultKey{}).(*[]byte); ok {
		*p = data
	}
}
