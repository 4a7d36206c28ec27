-- retry: dead, retry or scheduled -> ready, now ("run it now", `jobs retry`). A dead job
-- starts over with a full attempt budget; a retry or scheduled job keeps its attempts.
--
-- KEYS[1]  jobs:{q}:scheduled   ZSET  job ID -> run_at (ms)
-- KEYS[2]  jobs:{q}:retry       ZSET  job ID -> run_at (ms)
-- KEYS[3]  jobs:{q}:dead        ZSET  job ID -> died_at (ms)
-- KEYS[4]  jobs:{q}:ready       LIST  job IDs ready to run
-- KEYS[5]  jobs:{q}:wake        LIST  one 'r' token per job made ready
-- KEYS[6]  jobs:{q}:events      STREAM the events of each call that made jobs ready: a
--                               'requeued' line per job
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  from                 "" to retry from any of those states, or one of them only
--                               (retry --all-dead: a stale dead entry may name a newer job)
-- ARGV[3]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- ARGV[4..]                     job IDs
-- Returns  one string per ID: "ready" (moved), or the state that cannot be retried
--          ("ready", "active", "done" -> prefixed "not:"), or "missing".
-- Clock    none.
-- Invariant a job leaves exactly one set and enters ready; active jobs are never touched,
--          so a retry cannot race the worker running it.

local sets = {scheduled = KEYS[1], retry = KEYS[2], dead = KEYS[3]}
local ready, wakes, events, prefix, from = KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[2]
local maxlen = tonumber(ARGV[3])
local ev = event_buf(events, maxlen)
local out, n = {}, 0
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = prefix .. id
  local job = redis.call('HMGET', key, 'state', 'type', 'attempt', 'limit_key')
  local state = job[1]
  if not state then
    table.insert(out, 'missing')
  elseif not sets[state] or (from ~= '' and state ~= from) then
    table.insert(out, 'not:' .. state)
  else
    redis.call('ZREM', sets[state], id)
    if state == 'dead' then
      redis.call('HSET', key, 'attempt', 0)
      redis.call('HDEL', key, 'cancel')
      redis.call('PERSIST', key)
    end
    redis.call('HSET', key, 'state', 'ready')
    push_ready(ready, prefix, id, job[4], false, now_ms())
    event(ev, 'requeued', id, job[2], job[3], '', '')
    n = n + 1
    table.insert(out, 'ready')
  end
end
wake(wakes, n, 'r')
write_events(ev)
return out
