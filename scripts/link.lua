-- link: registers a waiting job as a dependent of a job in queue q, any queue's slot (the
-- dependency's side of a workflow edge), or says that the dependency has already ended.
-- The client creates the dependent first (enqueue.lua, state waiting, the edge in its
-- pending set; or retry.lua, a dead dependent put back to waiting with its pending set
-- refilled), then links each dependency, then resolves at once (resolve.lua) the edges
-- whose dependency had ended: a client that dies between the steps leaves a dependent
-- that a rerun with the same IDs completes, never a dependency that resolves a job not
-- yet written.
--
-- KEYS[1]  jobs:{q}:job:<id>          HASH the dependency (read: state; written: the
--                                     dependents flag; PERSIST in retry mode, see ARGV[2])
-- KEYS[2]  jobs:{q}:dependents:<id>   SET  the jobs waiting on it ("queue\tid" members)
-- ARGV[1]  member                     the dependent, "queue\tid"
-- ARGV[2]  mode                       "" (enqueue), or "retry": a retried dependent under
--                                     the default policy also waits on a DEAD dependency
--                                     (an operator may retry it), which is linked as one
--                                     not ended, and kept (PERSIST) until it is retried,
--                                     purged, deleted or trimmed from the dead set: each
--                                     of those ends resolves its dependents (follow)
-- Returns  "pending" (linked: the dependency's end will resolve the dependent, once),
--          "waiting" (linked, and the dependency itself waits on others: the caller checks
--          that the dependent is not among them, see Client.link: a dependency cycle),
--          "done", "dead" (ended already: the caller resolves the edge; "dead" never in
--          retry mode), or "missing" (no such job: never enqueued, purged, or its done
--          record expired; resolved as dead).
-- Clock    none.
-- Invariant an edge is linked only to a dependency that has not ended (or, in retry mode,
--          is dead: it ends again only through a script that follows its dependents), in
--          the same step that reads its state, so every edge is resolved exactly once: by
--          the dependency's terminal script, or by the caller. SADD makes a rerun a no-op.

local state = redis.call('HGET', KEYS[1], 'state')
if not state then return 'missing' end
if state == 'done' then return state end
if state == 'dead' then
  if ARGV[2] ~= 'retry' then return state end
  -- Its hash would expire with no script running, leaving the dependent waiting on
  -- nothing: kept instead, and dropped only by a script that follows its dependents.
  redis.call('PERSIST', KEYS[1])
end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'dependents', '1')
if state == 'waiting' then return 'waiting' end
return 'pending'
