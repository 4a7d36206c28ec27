// Package worker runs jobs: it claims them from its queues under a lease, runs each with
// a Handler under the job's timeout, renews leases by heartbeat while handlers run, and
// settles every attempt with exactly one transition: ack (done), fail (retry with
// exponential backoff, or dead), hand back or postpone (not run to the end here; no
// attempt counted).
//
// # How a worker is built
//
// One goroutine, the loop (loop.go), owns all of a Run's state: the runs and their states
// (run.go: claimed, buffered, running, settling, abandoned), the claim-ahead buffer,
// pending acks, lease deadlines and per-queue schedules. Slots are goroutines that only
// run handlers and report outcomes; every Redis call runs on a goroutine of its own and
// reports back to the loop (calls.go; settle.go for outcomes), so no call, however slow, holds the loop, the
// other queues or the watchdogs. A queue whose calls fail (its cluster master is down)
// backs off alone. A call that records an outcome (fail, hand back, postpone) is retried
// with backoff while the job's lease holds; if it never gets through, the lease expires
// and the job runs again (at-least-once).
//
// Heartbeats renew leases every third of Config.Lease and give up after a quarter of
// it; a failed beat is retried a twelfth later. Those bounds, like every call's, hold
// only when the go-redis client honours context deadlines: set ContextTimeoutEnabled in
// its options, or keep ReadTimeout (3s by default) well under the lease. The watchdog
// needs neither: it cancels a handler five sixths of a lease after its last renewal,
// whatever Redis does.
//
// Every Config.Beat (5s) the loop renews the worker's entry in the registry of live
// processes (`jobs workers`, queue.Client.Processes) with one more call of its own; the
// reply carries an operator's order. Quiet: claim nothing more, hand back the jobs
// claimed ahead, finish the running ones (their leases still renewed). Stop: shut down as
// when Run's context ends. Run leaves the registry when it returns.
//
// An idle worker does not poll: it blocks on its queues' wake lists, which every enqueue
// pushes to, and wakes on its own when the next delayed or retrying job is due, so a new
// job starts within a millisecond and a delayed one within a few of its due time.
//
// # Progress and the metrics history
//
// A handler reports how far its job has got with Progress (an exec handler writes lines
// to file descriptor 3; see Exec). The latest value wins; the worker sends the new values
// of all its jobs at most once a second (with the lease heartbeat when one is due) and
// once when the handler returns, only while it holds the lease. The worker also adds up
// what it ran per queue, job type and minute (attempts, failures, run and wait times) and
// flushes it to Redis every Config.HistoryInterval and when it stops: queue's
// Client.History and `jobs stats --history` read it.
//
// # Handler contract
//
// Return nil for success, an error to retry (with backoff, up to the job's max_retry),
// SkipRetry(err) to dead-letter at once. A panic is a failure with its stack in
// last_error; runtime.Goexit (t.FailNow) is a failure too. The handler gets a copy of the
// job. Watch ctx: it is cancelled at the timeout (its Deadline; Err is then
// context.DeadlineExceeded), when the lease is lost, when the lease could not be renewed
// for five sixths of its length (Redis unreachable: the handler is stopped before another
// worker may take the job), when an operator cancels the job (within about a round trip,
// through a notice; the heartbeat catches missed notices), and when shutdown runs out of
// time; context.Cause says which. A handler that ignores it is abandoned
// Config.AbandonGrace (5s) later: the attempt fails and a new slot takes its place (its
// goroutine cannot be killed; an exclusive job's lock stays held until it returns).
// Delivery is at-least-once: make handlers idempotent.
//
// A cancelled job ends dead on every path: failed, succeeded after the cancel, still in
// the claim-ahead buffer, or handed back at shutdown.
//
// A job whose type this worker has no handler for (ErrNoHandler) is postponed, not
// failed, so a worker that has the handler runs it; see ErrNoHandler.
//
// # Order
//
// Each queue is FIFO: jobs are claimed in the order they became ready (enqueued, or
// promoted when due: jobs of one client due at the same instant in enqueue order), and a
// worker starts the jobs it claimed from a queue in that order. So with one worker of
// concurrency 1, jobs start one after another in queue order. Jobs put back at the head of
// the queue break the order on purpose, to run soon: those handed back (shutdown, claimed
// ahead and not started in time) or reaped after a crash. Retries, postponed jobs and
// delayed jobs join the queue when due. With more slots, workers or queues, jobs start in
// order but run side by side, so they may finish in any order; nothing orders queues
// against each other beyond their weights.
//
// # Exec handlers
//
// Exec handlers (`jobs worker --run TYPE=COMMAND`) run a program per job: payload on
// stdin, JOB_ID, JOB_TYPE, JOB_QUEUE and JOB_ATTEMPT in the environment, exit 0 for
// success (stdout is the result), 75 to ask for a retry, 76 to snooze (ExitSnooze: also
// the answer to an upstream 429, with the Retry-After delay as stdout's last line), 77 to
// pause the job's limit key (ExitPauseKey: the same, for every job of the key; the key is
// in JOB_LIMIT_KEY), anything else to fail. Progress lines "PERCENT [MESSAGE]" go to file descriptor 3
// (JOB_PROGRESS_FD); bad lines are ignored.
//
// # Typed jobs, middleware, policies and hooks
//
// HandleArgs registers a handler that gets its job's payload decoded into a Go type (see
// queue.Args); Mux.Use wraps every handler of a Mux in middleware; Snooze asks for the
// job to run again later without counting the attempt (RetryAfter, the same for an
// upstream 429; a queue's own limits are set with queue.Client.SetLimit); Config.Types sets a timeout,
// backoff or retry bound per job type; Config.OnError and OnDead are called for each
// recorded failure and each death, a panic arriving as a *PanicError with its stack.
// The causes of a handler's context (context.Cause) are ErrLeaseLost, ErrLeaseExpiring,
// ErrLockLost, ErrCancelled and ErrShutdown, besides context.DeadlineExceeded at the
// timeout. Package jobstest runs handlers inside an application's own tests.
package worker
