-- retry: dead, retry or scheduled -> ready, now ("run it now", `jobs retry`). A dead job
-- starts over with a full attempt budget; a retry or scheduled job keeps its attempts;
-- either way its run_at goes (it is due now). A dead workflow job (an after field) that
-- never started (it died waiting: cancelled, or a dependency died) goes back to waiting
-- instead, its pending set refilled with every dependency its after field lists: the
-- caller then links each in its own slot (link.lua, in retry mode under the default
-- policy, so a dead dependency is waited on too) and resolves those that ended
-- (resolve.lua), as an enqueue does: a retried job never runs before its dependencies
-- succeeded, unless its policy is 'run'. A dead unique job takes its unique key back for
-- its unique TTL; when another job holds the key now, it is refused and stays dead, as
-- Enqueue refuses a second job with the key.
--
-- KEYS[1]  jobs:{q}:scheduled   ZSET  job ID -> run_at (ms)
-- KEYS[2]  jobs:{q}:retry       ZSET  job ID -> run_at (ms)
-- KEYS[3]  jobs:{q}:dead        ZSET  job ID -> died_at (ms)
-- KEYS[4]  jobs:{q}:ready       LIST  job IDs ready to run
-- KEYS[5]  jobs:{q}:wake        LIST  one 'r' token per job made ready
-- KEYS[6]  jobs:{q}:events      STREAM the events of each call that made jobs ready: a
--                               'requeued' line per job (ready or waiting again; one
--                               waiting again has the error 'waiting on its dependencies')
-- KEYS[7]  jobs:{q}:waiting     ZSET  job ID -> when it started waiting (ms)
-- Keys     named from ARGV[1]: the job's pending set jobs:{q}:deps:<id> (DEL, SADD),
--          its unique key (the hash's unique_key: GET, SET PX unique_ttl)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  from                 "" to retry from any of those states, or one of them only
--                               (retry --all-dead: a stale dead entry may name a newer job)
-- ARGV[3]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- ARGV[4..]                     job IDs
-- Returns  one string per ID: "ready" (moved), "waiting\n<policy>\n<after>" (moved, back
--          to waiting for its dependencies: its dep_policy, "die" or "run", then its after
--          field, "queue\tid" lines, for the caller to link), "unique:<holder>" (a dead
--          unique job whose key the job holder holds: nothing changed), or the state that
--          cannot be retried ("ready", "active", "done", "waiting" -> prefixed "not:"), or
--          "missing".
-- Clock    Redis TIME (the waiting set's score).
-- Invariant a job leaves exactly one set and enters ready or waiting, or nothing changes;
--          a job enters waiting with every dependency in its pending set, before any link,
--          so no dependency's end is missed; active jobs are never touched, so a retry
--          cannot race the worker running it; a unique key is never taken from the job
--          holding it.

local sets = {scheduled = KEYS[1], retry = KEYS[2], dead = KEYS[3]}
local ready, wakes, events, waiting, prefix, from = KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[1], ARGV[2]
local maxlen = tonumber(ARGV[3])
local ev = event_buf(events, maxlen)
local base = string.sub(prefix, 1, -5)
local out, n = {}, 0
local now = nil
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = prefix .. id
  local job = redis.call('HMGET', key, 'state', 'type', 'attempt', 'limit_key', 'after', 'unique_key', 'unique_ttl', 'dep_policy', 'started_at')
  local state = job[1]
  local holder = nil
  if state == 'dead' and job[6] then
    holder = redis.call('GET', job[6])
    if holder == id then holder = nil end
  end
  if not state then
    table.insert(out, 'missing')
  elseif not sets[state] or (from ~= '' and state ~= from) then
    table.insert(out, 'not:' .. state)
  elseif holder then
    table.insert(out, 'unique:' .. holder)
  else
    now = now or now_ms()
    redis.call('ZREM', sets[state], id)
    local to = 'ready'
    if state == 'dead' then
      redis.call('HSET', key, 'attempt', 0)
      redis.call('HDEL', key, 'cancel')
      redis.call('PERSIST', key)
      -- Free (checked above) or expired: taken back for the job's unique TTL. A job
      -- written before unique_ttl was kept has none: its key is left free.
      if job[6] and job[7] and redis.call('EXISTS', job[6]) == 0 then
        redis.call('SET', job[6], id, 'PX', job[7])
      end
      -- A job that ever started (started_at) ran once its dependencies had all succeeded
      -- (or ended, under 'run'), and a done job stays done: it waits for nothing, even
      -- on a dependency whose done record has expired since.
      if job[5] and not job[9] then
        -- Every dependency, not the members left: one that died was removed when it died
        -- and must be waited on again (the caller's link tells the ones done).
        local deps = base .. 'deps:' .. id
        redis.call('DEL', deps)
        for line in string.gmatch(job[5], '[^\n]+') do redis.call('SADD', deps, line) end
        to = 'waiting'
      end
    end
    redis.call('HSET', key, 'state', to)
    redis.call('HDEL', key, 'run_at')
    if to == 'waiting' then
      redis.call('ZADD', waiting, now, id)
    else
      push_ready(ready, prefix, id, job[4], false, now)
      n = n + 1
    end
    -- Its error field says when the job went back to waiting, not to ready: the same
    -- event either way, which a reader could not tell apart.
    local why = ''
    if to == 'waiting' then why = 'waiting on its dependencies' end
    event(ev, 'requeued', id, job[2], job[3], '', why)
    if to == 'waiting' then
      table.insert(out, 'waiting\n' .. (job[8] or 'die') .. '\n' .. job[5])
    else
      table.insert(out, to)
    end
  end
end
wake(wakes, n, 'r')
write_events(ev)
return out
