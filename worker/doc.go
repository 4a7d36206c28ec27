// Package worker runs jobs: it claims them from its queues under a lease, runs each with
// a Handler under the job's timeout, renews leases by heartbeat while handlers run, and
// settles every attempt with exactly one transition: ack (done), fail (retry with
// exponential backoff, or dead), or hand back (the worker is stopping).
//
// An idle worker does not poll: it blocks on its queues' wake lists, which every enqueue
// pushes to, and wakes on its own when the next delayed or retrying job is due, so a new
// job starts within a millisecond and a delayed one within a few of its due time.
//
// Handler contract: return nil for success, an error to retry (with backoff, up to the
// job's max_retry), SkipRetry(err) to dead-letter at once. A panic is a failure with its
// stack in last_error. Watch ctx: it is cancelled at the timeout (its Deadline; Err is
// then context.DeadlineExceeded, in contexts derived from it too), when the lease is
// lost, when an operator cancels the job, and when shutdown runs out of time;
// context.Cause says which. A handler that ignores it is abandoned Config.AbandonGrace
// (5s) later (the attempt fails; its goroutine cannot be killed).
// Delivery is at-least-once: make handlers idempotent.
//
// Exec handlers (`jobs worker --run TYPE=COMMAND`) run a program per job: payload on
// stdin, JOB_ID, JOB_TYPE, JOB_QUEUE and JOB_ATTEMPT in the environment, exit 0 for
// success (stdout is the result), 75 to ask for a retry, anything else to fail.
package worker
