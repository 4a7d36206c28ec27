package queue

import (
	"context"
	"encoding/json"
	"fmt"
)

// Args are a typed job's arguments: a Go type whose JSON encoding is the job's payload
// and whose Kind is its job type. Declare one per kind of job, enqueue values of it with
// [Client.EnqueueArgs], and register its handler with worker.HandleArgs, which gets the
// payload decoded:
//
//	type Welcome struct{ UserID int `json:"user_id"` }
//
//	func (Welcome) Kind() string { return "email:welcome" }
//
// Kind must not depend on the value: it is called on the zero value too.
type Args interface {
	Kind() string
}

// ArgsWithOptions is an [Args] type that declares the options of its jobs once (a queue,
// max retry, timeout, unique, exclusive...). Options given to EnqueueArgs or ArgsJob
// come after these, so they override them.
type ArgsWithOptions interface {
	Args
	JobOptions() []Option
}

// ArgsJob returns the job that enqueues args: Type args.Kind(), Payload its JSON, and
// Options the type's own (see [ArgsWithOptions]) followed by opts. For
// [Client.EnqueueBatch]. It fails with ErrInvalid when args does not encode to JSON.
func ArgsJob(args Args, opts ...Option) (BatchJob, error) {
	payload, err := json.Marshal(args)
	if err != nil {
		return BatchJob{}, fmt.Errorf("%w: %s arguments do not encode to JSON: %w", ErrInvalid, args.Kind(), err)
	}
	if o, ok := args.(ArgsWithOptions); ok {
		opts = append(o.JobOptions(), opts...)
	}
	return BatchJob{Type: args.Kind(), Payload: payload, Options: opts}, nil
}

// EnqueueArgs enqueues a job of type args.Kind() whose payload is args' JSON, with the
// type's own options (see [ArgsWithOptions]) and then opts. It returns what
// [Client.Enqueue] returns.
func (c *Client) EnqueueArgs(ctx context.Context, args Args, opts ...Option) (string, error) {
	job, err := ArgsJob(args, opts...)
	if err != nil {
		return "", err
	}
	return c.Enqueue(ctx, job.Type, job.Payload, job.Options...)
}
