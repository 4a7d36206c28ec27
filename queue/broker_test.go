package queue

import (
	"context"
	"time"
)

// Finished is a claimed job whose handler succeeded, with the result to store: the
// tests' way of writing AckClaim's two parallel slices.
type Finished struct {
	Job    *Job
	Result []byte
}

// ackFinished calls AckClaim with fin's jobs and results.
func (c broker) ackFinished(ctx context.Context, queue string, fin []Finished, n int,
	lease time.Duration, worker string) ([]error, []*Job, error) {
	jobs := make([]*Job, len(fin))
	results := make([][]byte, len(fin))
	for i, f := range fin {
		jobs[i], results[i] = f.Job, f.Result
	}
	return c.AckClaim(ctx, queue, jobs, results, n, lease, worker)
}
