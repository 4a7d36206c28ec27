// Package queue is the producer side of jobs and the owner of its Redis data: key names,
// the job hash, and every state transition, each one Lua script run atomically by Redis.
//
// A job's life:
//
//	enqueue ──► scheduled (ZSET, score=run_at) ──promote──►┐
//	   │                                                    ▼
//	   └────────────────────────────────────────────► ready (LIST) ──claim──► active (ZSET, score=lease deadline)
//	                                                    ▲   ▲                   │ ack ──────────────► done (hash kept DoneRetention)
//	                                                    │   └──── handback ─────┤ fail, attempts left ► retry (ZSET, score=run_at)
//	                                                    └──────promote──────────┤ fail, none left ───► dead (ZSET, score=died_at)
//	                                                                            └ reap (lease expired) ► retry (due now) or dead
//
// A job an operator cancels while it is active ([Client.Cancel]) ends dead on every path
// out of active: ack, fail, handback and reap all send it to dead.
//
// Guarantees:
//
//   - At-least-once delivery. A job leaves active only through ack (or AckClaim, which
//     acks a batch and claims the next in one script), fail, handback or reap; a worker that dies mid-job stops renewing its lease and any live worker's Reap
//     returns the job to retry. Handlers should be idempotent; Job.ID and Job.Attempt help.
//   - Lease fencing. A claim gives the job a fresh lease token. Heartbeat, Ack, Fail and
//     HandBack change nothing without the current token (ErrLeaseLost), so a worker whose
//     lease expired cannot overwrite the run that replaced it. Ack, Fail and HandBack leave
//     the token marked ended, so the same call resent after a lost reply gets its first
//     outcome again instead of ErrLeaseLost.
//   - One clock. Scripts read Redis's TIME: due times and lease deadlines do not depend on
//     the workers' clocks. Only At(t) takes a client's time, as given.
//   - Cluster safe. All keys of a queue share the hash tag {queue}; every script touches
//     keys of one queue only.
//
// The lease is not the timeout: the lease (seconds) bounds how long a dead worker's job
// stays invisible, while the timeout (minutes) bounds a live handler. Heartbeats renew the
// lease for as long as the handler runs within its timeout.
package queue
