-- cancel: waiting, scheduled, ready or retry -> dead at once (a waiting job also leaves
-- jobs:{q}:waiting, reached from the job key prefix; what waits on the job is resolved,
-- see to_dead in scripts/lib); active -> flagged, and its worker is
-- told at once on the cancel channel, so it cancels the handler's context (at the latest
-- at its next heartbeat, which reports the flag); the attempt then ends dead however it
-- ends (`jobs cancel`). The dead set keeps the job for inspection and `jobs retry`.
--
-- KEYS[1]  jobs:{q}:scheduled   ZSET  job ID -> run_at (ms)
-- KEYS[2]  jobs:{q}:retry       ZSET  job ID -> run_at (ms)
-- KEYS[3]  jobs:{q}:ready       LIST  job IDs ready to run
-- KEYS[4]  jobs:{q}:dead        ZSET  job ID -> died_at (ms)
-- KEYS[5]  jobs:{q}:events      STREAM one 'cancelled' entry per cancel that changed something
--                               (a waiting job is dead now; an active one is flagged, and
--                               the end of its attempt writes its 'dead' entry)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  dead_retention_ms    a dead job's hash expires after this
-- ARGV[3]  dead_max             the dead set keeps at most this many jobs
-- ARGV[4]  id                   the job to cancel
-- ARGV[5]  cancel channel       "jobs:cancel": a pub/sub channel, not a key (no slot; on a
--                               cluster a PUBLISH reaches subscribers on every node)
-- ARGV[6]  queue                the queue's name, "q"
-- ARGV[7]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- Returns  "dead" (cancelled), "cancelling" (active: its worker will stop it; a notice
--          "<queue> <id>" was published on the channel, again on each repeated cancel),
--          "not:done" / "not:dead" (already finished), or "missing".
-- Clock    Redis TIME.
-- Invariant an active job is only flagged: its worker, holding the lease, settles it.

local scheduled, retry, ready, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, retention, dead_max, id = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local events, maxlen = KEYS[5], tonumber(ARGV[7])
local ev = event_buf(events, maxlen)
local key = prefix .. id
local job = redis.call('HMGET', key, 'state', 'type', 'attempt', 'cancel', 'limit_key')
local state = job[1]
if not state then return 'missing' end
if state == 'done' or state == 'dead' then return 'not:' .. state end
if state == 'active' then
  -- A repeated cancel publishes again (the notice may have been missed) but is no new
  -- event: the job's state did not change.
  if not job[4] then
    redis.call('HSET', key, 'cancel', 1)
    event(ev, 'cancelled', id, job[2], job[3], '', '')
    write_events(ev)
  end
  -- Queue names have no space (ValidateQueue), so the first space ends the queue.
  redis.call('PUBLISH', ARGV[5], ARGV[6] .. ' ' .. id)
  return 'cancelling'
end
if state == 'ready' then
  unready(ready, prefix, id, job[5])
elseif state == 'scheduled' then
  redis.call('ZREM', scheduled, id)
elseif state == 'waiting' then
  redis.call('ZREM', string.sub(prefix, 1, -5) .. 'waiting', id)
else
  redis.call('ZREM', retry, id)
end
redis.call('HSET', key, 'last_error', 'cancelled by operator')
-- It will not run at its run_at now: shown, it read as a run still to come.
redis.call('HDEL', key, 'run_at')
to_dead(dead, prefix, id, now_ms(), retention, dead_max, nil, ev)
event(ev, 'cancelled', id, job[2], job[3], '', 'cancelled by operator')
write_events(ev)
return 'dead'
