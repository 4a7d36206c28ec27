// Package queue enqueues jobs on Redis and lets an application look at them and steer
// them. Package worker runs them; package cron enqueues them on a schedule.
//
// # Enqueueing
//
// Create one [Client] per process over a go-redis client (a single node, Sentinel or a
// Redis Cluster) and share it:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	client, err := queue.NewClient(rdb, queue.Config{})
//	id, err := client.Enqueue(ctx, "email:welcome", []byte(`{"user":42}`))
//
// A job is a type (what runs it), a payload (bytes, up to [Config].MaxPayload) and
// options: [On] a queue (default "default"), [Delay] or [At] a time, [MaxRetry] attempts
// after the first, a [Timeout] per attempt, an [ID] of the caller's choosing, [Unique] to
// refuse a second job with the same key (by default its type and payload; see
// [UniqueKey]) on its queue until the first finishes or a TTL passes, and [Exclusive] to never run two jobs with the same key at once. Without
// options a job is due now, retried up to [DefaultMaxRetry] times with exponential
// backoff, and each attempt gets [DefaultTimeout].
//
// [Client.EnqueueBatch] writes many jobs in one round trip per queue and reports every
// job's outcome. Concurrent Enqueue calls share round trips too, without added delay.
//
// # Errors
//
// Enqueue returns when its context ends, whatever the Redis client's timeouts. A context
// that ended before the job was sent writes nothing. A job that was sent but got no reply
// gives an error wrapping [ErrUncertain] along with the job's ID: [Client.Get] tells
// whether it was written, and enqueueing it again with [ID] is safe. A duplicate
// ([ID] taken, [Unique] key held) gives [ErrDuplicate] and the existing job's ID; a bad
// argument gives [ErrInvalid] naming it, before anything is sent. A Redis that refuses
// writes (over its maxmemory) refuses the job whole: nothing is half-written.
//
// # A job's life
//
//	enqueue ──► scheduled ──(due)──► ready ──claim──► active ──ack──► done
//	   └──────────────────────────────┘  ▲                │
//	                                     │                ├─ fail, attempts left ──► retry ──(due)──► ready
//	                                     │                ├─ fail, none left ──────► dead
//	                                     └────────────────┴─ handed back, or lease expired (to the head of ready)
//
// A worker claims a job under a lease that it renews while the handler runs. A worker
// that dies stops renewing, and another worker puts its jobs back at the head of ready
// (next to run; the attempt counts, and a job with none left goes to dead) within about
// a lease. Each transition is one Lua script, run atomically by Redis on the keys of one
// queue (one Redis Cluster slot), and every time in it (due times, lease deadlines) is
// Redis's clock, not the workers'.
//
// Guarantees:
//
//   - At-least-once: a job enqueued without error runs until it succeeds or dies, even
//     if workers are killed mid-run; it may run more than once, so make handlers
//     idempotent (Job.ID and Job.Attempt help).
//   - Fenced leases: a worker whose lease ran out cannot ack, fail or renew the job that
//     another worker now runs.
//   - Each queue is FIFO: jobs are claimed in the order they became ready.
//
// # Looking and steering
//
// [Client.Stats] and [Client.Depths] count jobs per state (Stats also gives each queue's
// live workers and latency); [Client.Get], [Client.Find] and [Client.List] read them;
// [Client.Page] pages through them at a cost that does not grow with the queue. Ready
// jobs include those waiting under a limit key ([LimitKey]): every one of these counts,
// lists and purges them, after the jobs without a key;
// [Client.Retry], [Client.RetryAllDead], [Client.Cancel], [Client.Purge], [Client.Delete],
// [Client.Pause] and [Client.Resume] act on them, and [Client.Audit] records who did. A [Job] carries its last attempts ([Attempt]: when,
// where, how each ended). [Client.History] reads the metrics history workers keep per
// queue, job type and minute (processed, failed, p50/p95 run and wait times) for charts
// without Prometheus; a running job's handler reports its progress ([Job].Progress).
//
// Every running worker and scheduler keeps an entry in a registry of live processes,
// renewed every few seconds and expiring three beats after its process dies.
// [Client.Processes] lists them with the jobs each runs; [Client.Quiet] tells one to
// claim no more jobs and finish its running ones, [Client.Stop] to shut down gracefully.
//
// # Events
//
// Every transition appends one [Event] to its queue's capped stream in the same atomic
// step ([Config].Events sets the cap, or turns events off), so an event exists exactly
// for each change that committed, in commit order per queue. [Client.Events] follows the
// streams of several queues (on a Redis Cluster too) and resumes from a cursor; a reader
// that fell behind what the stream keeps gets a [GapError], never a silent loss.
// [Client.Wait] returns a job once it is done or dead. `jobs tail` prints the events.
//
// The `jobs` command does all this from a shell. The data is plain Redis that redis-cli
// can read: KEYS.md in the repository documents every key.
package queue
