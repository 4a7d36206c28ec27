-- delete: removes one waiting or finished job outright (the dashboard's delete): its ID
-- leaves its state's list or set, its hash and its unique key go. An active job is
-- refused (cancel it instead), so no worker loses a job under it.
--
-- KEYS[1]  jobs:{q}:scheduled   ZSET  job ID -> run_at (ms)
-- KEYS[2]  jobs:{q}:retry       ZSET  job ID -> run_at (ms)
-- KEYS[3]  jobs:{q}:ready       LIST  job IDs ready to run
-- KEYS[4]  jobs:{q}:dead        ZSET  job ID -> died_at (ms)
-- KEYS[5]  jobs:{q}:done        ZSET  job ID -> finished_at (ms)
-- KEYS[6]  jobs:{q}:events      STREAM one 'deleted' entry per job deleted
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  id                   the job to delete
-- ARGV[3]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- ARGV[4]  dead_retention_ms    a dependent that dies because the deleted job was its
--                               dependency (follow in scripts/lib) expires this long after
-- ARGV[5]  dead_max             the dead set keeps at most this many jobs
-- Returns  "deleted", "not:active", or "missing".
-- Clock    none.
-- Invariant the job's hash and its index entry go together; an active job is untouched. A
--          deleted job that had not ended counts as dead for its dependents and its batch
--          (follow in scripts/lib), so nothing waits forever on it.

local base = string.sub(ARGV[1], 1, -5)
local sets = {scheduled = KEYS[1], retry = KEYS[2], dead = KEYS[4], done = KEYS[5], waiting = base .. 'waiting'}
local ready, prefix, id = KEYS[3], ARGV[1], ARGV[2]
local key = prefix .. id
local job = redis.call('HMGET', key, 'state', 'type', 'attempt', 'dependents', 'batch', 'after', 'limit_key')
local state = job[1]
if not state then return 'missing' end
if state == 'active' then return 'not:active' end
if state == 'ready' then
  unready(ready, prefix, id, job[7])
elseif sets[state] then
  redis.call('ZREM', sets[state], id)
end
release_unique(key, id)
redis.call('DEL', key)
if job[6] then redis.call('DEL', base .. 'deps:' .. id) end
local ev = event_buf(KEYS[6], tonumber(ARGV[3]))
event(ev, 'deleted', id, job[2], job[3], '', '')
if job[4] or job[5] then
  follow(prefix, {{id, 'dead', job[4], job[5]}}, now_ms(), ev, tonumber(ARGV[4]), tonumber(ARGV[5]))
end
write_events(ev)
return 'deleted'
