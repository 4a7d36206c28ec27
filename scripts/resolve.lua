-- resolve: delivers resolutions to a waiting job or a batch in this slot, from jobs that
-- ended with one outcome in another queue (a worker delivering outbox entries, grouped by
-- target and outcome, or a client whose link found the dependency ended). Idempotent:
-- the SREM of each source from the target's pending set is the guard, so a repeated
-- delivery changes nothing.
--
-- KEYS[1]  jobs:{q}:events      STREAM the target's events: enqueued when a waiting job
--                               becomes ready, dead when it dies by its policy, enqueued
--                               for a batch callback
-- ARGV[1]  job key prefix       "jobs:{q}:job:" of the target's queue; the keys reached
--                               from it (jobs:{q}:deps:<id>, waiting, ready, wake, dead,
--                               batch:<id>, batch:<id>:pending, outbox) share its hash tag
-- ARGV[2]  kind                 "j" a waiting job, "b" a batch
-- ARGV[3]  target               its ID
-- ARGV[4]  outcome              "done" or "dead" (a purged or unknown job is "dead"), or
--                               "cycle" (a job: the source waits on it, so it dies,
--                               whatever its policy, see Client.link)
-- ARGV[5]  dead_retention_ms    a dependent that dies expires this long after; a batch
--                               that ends is kept this long
-- ARGV[6]  dead_max             the dead set keeps at most this many jobs
-- ARGV[7]  events_max           the events stream keeps about this many entries (<= 0:
--                               none)
-- ARGV[8..] sources             the jobs that ended, "queue\tid" each (a batch's children
--                               are settled with one SREM)
-- Returns  1.
-- Clock    Redis TIME.
-- Invariant each edge resolves once (set membership, never a counter); a dependent leaves
--          waiting exactly once; a dependent that dies here is followed in turn (its own
--          dependents and batch), as on every path into dead.

local prefix, kind, target, outcome = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local retention, dead_max = tonumber(ARGV[5]), tonumber(ARGV[6])
local ev = event_buf(KEYS[1], tonumber(ARGV[7]))
local now = now_ms()
if kind == 'b' then
  batch_settled(string.sub(prefix, 1, -5), target, {unpack(ARGV, 8)}, outcome, now, ev, retention)
else
  for i = 8, #ARGV do
    local died = resolve_dep(prefix, target, ARGV[i], outcome, now, ev, retention, dead_max)
    if died then follow(prefix, died, now, ev, retention, dead_max) end
  end
end
write_events(ev)
return 1
