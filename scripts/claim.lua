-- claim: ready -> active, up to ARGV[2] jobs, each under a new lease.
--
-- KEYS[1]  jobs:{q}:ready       LIST  job IDs ready to run (RPOP: oldest first)
-- KEYS[2]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[3]  jobs:{q}:paused      STRING present while the queue is paused
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  count                most jobs to claim (the worker's free slots)
-- ARGV[3]  lease_ms             lease length; the worker renews it by heartbeat
-- ARGV[4]  worker               worker ID, recorded in the job
-- ARGV[5]  token prefix         unique per call; the lease token is token prefix .. ":" .. n
-- Returns  an array with one entry per claimed job: the job's hash as a flat
--          field/value array (HGETALL) followed by "id", id. Empty when the queue is
--          paused or has nothing ready.
-- Clock    Redis TIME.
-- Invariant a claimed job is in active with a lease token that only its claimer knows;
--          heartbeat, ack, fail and handback change nothing without that token.

local ready, active, paused = KEYS[1], KEYS[2], KEYS[3]
local prefix, count, lease_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local worker, token = ARGV[4], ARGV[5]
if redis.call('EXISTS', paused) == 1 then return {} end
local ids = redis.call('RPOP', ready, count)
if not ids then return {} end
local now = now_ms()
local out = {}
for n, id in ipairs(ids) do
  local key = prefix .. id
  if redis.call('EXISTS', key) == 1 then
    redis.call('HINCRBY', key, 'attempt', 1)
    redis.call('HSET', key, 'state', 'active', 'started_at', now, 'worker', worker,
      'lease', token .. ':' .. n)
    redis.call('ZADD', active, now + lease_ms, id)
    local job = redis.call('HGETALL', key)
    table.insert(job, 'id'); table.insert(job, id)
    table.insert(out, job)
  end
end
return out
