// Package broker gives the packages that run jobs (worker, cron, the CLI, the benchmark)
// a queue.Client's worker side: the transitions of claimed jobs, the waits on wake lists
// and the cancel notices. Package queue implements it on an unexported type, so that
// applications see only Enqueue and the admin calls; each method's contract is documented
// where it is implemented (queue/lifecycle.go, queue/wait.go, queue/cancelwatch.go,
// queue/registry.go).
package broker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// Broker is a queue.Client's worker side.
type Broker interface {
	// Redis returns the client's Redis connection.
	Redis() redis.UniversalClient

	// Claim takes up to n ready jobs (at most proto.MaxBatch) under a lease for worker.
	Claim(ctx context.Context, queue string, n int, lease time.Duration, worker string) ([]*queue.Job, error)
	// AckClaim acknowledges finished jobs with their results, then claims up to n more, in
	// one round trip. acked has an entry per finished job: nil, ErrCancelled or
	// ErrLeaseLost.
	AckClaim(ctx context.Context, queue string, finished []*queue.Job, results [][]byte, n int,
		lease time.Duration, worker string) (acked []error, claimed []*queue.Job, err error)
	// AckClaimLimited is AckClaim that also says what the claim met of the queue's limits.
	AckClaimLimited(ctx context.Context, queue string, finished []*queue.Job, results [][]byte, n int,
		lease time.Duration, worker string) (acked []error, claimed []*queue.Job, lim proto.Limited, err error)
	// Waiter returns the registration for hand-offs of worker, whose jobs have leases of
	// lease (see queue/handoff.go).
	Waiter(worker string, lease time.Duration) proto.Waiter
	// AckClaimWaiting is AckClaimLimited for waiter w: the claim also returns the jobs
	// handed to w, and registers w as a waiter of the queue when it ran the queue dry
	// (registered), else takes it out.
	AckClaimWaiting(ctx context.Context, queue string, finished []*queue.Job, results [][]byte, n int,
		lease time.Duration, worker string, w *proto.Waiter) (acked []error, claimed []*queue.Job, lim proto.Limited, registered bool, err error)
	// Ack marks one claimed job done with result.
	Ack(ctx context.Context, job *queue.Job, result []byte) error
	// Heartbeat renews the leases of jobs, returning the lease tokens lost and cancelled.
	Heartbeat(ctx context.Context, queue string, lease time.Duration, jobs []*queue.Job) (lost, cancelled []string, err error)
	// HeartbeatProgress is Heartbeat that also stores the progress of the jobs whose entry
	// in progress (nil, or one per job) is not nil, fenced by the same lease tokens.
	HeartbeatProgress(ctx context.Context, queue string, lease time.Duration, jobs []*queue.Job,
		progress []*proto.Progress) (lost, cancelled []string, err error)
	// Fail records a failed attempt: retry after retryIn, or dead (proto.NoRetry: dead now).
	Fail(ctx context.Context, job *queue.Job, reason string, retryIn time.Duration) (queue.State, error)
	// HandBack gives a claimed job back unrun: to the head of ready, or after a delay.
	HandBack(ctx context.Context, job *queue.Job, after time.Duration) error
	// Postpone gives a claimed job back unrun to run after a positive delay, with a reason.
	Postpone(ctx context.Context, job *queue.Job, after time.Duration, reason string) error
	// PauseKey is Postpone that also pauses the job's limit key for after.
	PauseKey(ctx context.Context, job *queue.Job, after time.Duration, reason string) error
	// Promote moves due scheduled and retry jobs to ready; next is the wait until the
	// next one is due (0: more are due now; negative: none waiting).
	Promote(ctx context.Context, queue string) (moved int, next time.Duration, err error)
	// Reap puts back the jobs whose lease expired.
	Reap(ctx context.Context, queue string) (int, error)
	// ReapDeliver is Reap, then Deliver when the queue's outbox holds entries.
	ReapDeliver(ctx context.Context, queue string) (reaped, delivered int, err error)
	// Deliver delivers the queue's outbox: the ends of its jobs to dependents and batches
	// in other slots.
	Deliver(ctx context.Context, queue string) (int, error)
	// Wait blocks for a wake token on one of queues, at most proto.MaxWait.
	Wait(ctx context.Context, queues []string, timeout time.Duration) (queue, token string, err error)
	// WaitHanded is Wait that also pops the jobs handed to w (claimed for it already).
	WaitHanded(ctx context.Context, queues []string, timeout time.Duration, w *proto.Waiter) (
		queue, token string, job *queue.Job, err error)
	// Wake pushes a wake token back on a queue's wake list.
	Wake(ctx context.Context, queue, token string) error
	// RecordMetrics adds samples to the metrics history: one script call per queue, all
	// pipelined in one round trip. retry holds the samples of the calls that certainly did
	// not run, safe to send again.
	RecordMetrics(ctx context.Context, samples []*proto.MetricsSample) (retry []*proto.MetricsSample, err error)
	// WatchCancels calls fn for each cancel of an active job until ctx is done.
	WatchCancels(ctx context.Context, fn func(proto.CancelNotice)) error

	// Register is a process's beat in the registry of live processes: it writes p's
	// entry, to expire after ttl, and returns the order an operator left there ("",
	// proto.OrderQuiet, proto.OrderStop) and the entry's start time (pass it back in
	// p.StartedAt on later beats).
	Register(ctx context.Context, p *queue.Process, ttl time.Duration) (order string, startedAt time.Time, err error)
	// Deregister removes a process from the registry at once (a clean stop).
	Deregister(ctx context.Context, id string) error
}

// Of returns client's worker side.
func Of(client *queue.Client) Broker {
	return proto.BrokerOf(client).(Broker)
}
