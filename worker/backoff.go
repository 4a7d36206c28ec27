package worker

import (
	"math/rand/v2"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// BackoffFunc returns how long to wait before retrying job after its attempt failed with
// err. job.Attempt is the attempt that failed (1 for the first run).
type BackoffFunc func(job *queue.Job, err error) time.Duration

// MaxBackoff caps DefaultBackoff.
const MaxBackoff = 5 * time.Minute

// DefaultBackoff waits min(2^attempt s, 5 min), with "equal jitter": a random point in the
// upper half of that window, so jobs that failed together (a dependency went down) do not
// all come back in the same millisecond.
func DefaultBackoff(job *queue.Job, _ error) time.Duration {
	d := MaxBackoff
	if a := job.Attempt; a < 20 {
		d = min(time.Duration(1<<max(a, 0))*time.Second, MaxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}
