package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jobs-dev/jobs/queue"
)

// HandleArgs registers fn on m for the jobs of T's kind (see queue.Args): fn gets the
// job's payload decoded from JSON into a T. A payload that does not decode fails the job
// at once, no retries (SkipRetry: retrying cannot fix it), with an error naming the job
// type, T and the decoding error. Fields of the payload that T lacks are ignored, so a
// producer may add fields before every worker knows them. T is the value type whose Kind
// method is declared (not a pointer to it); HandleArgs panics, as Handle does, when the
// kind already has a handler.
func HandleArgs[T queue.Args](m *Mux, fn func(ctx context.Context, job *queue.Job, args T) error) {
	var zero T
	m.Handle(zero.Kind(), argsHandler[T](fn))
}

// argsHandler decodes a job's payload into a T for its function.
type argsHandler[T queue.Args] func(ctx context.Context, job *queue.Job, args T) error

func (h argsHandler[T]) Process(ctx context.Context, job *queue.Job) error {
	var args T
	if err := json.Unmarshal(job.Payload, &args); err != nil {
		return SkipRetry(fmt.Errorf("payload of %s job does not decode into %T: %w", job.Type, args, err))
	}
	return h(ctx, job, args)
}
