-- claim: ready -> active, up to ARGV[2] jobs, each under a new lease.
--
-- KEYS[1]  jobs:{q}:ready       LIST  job IDs ready to run (RPOP: oldest first)
-- KEYS[2]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[3]  jobs:{q}:paused      STRING present while the queue is paused
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  count                most jobs to claim (the worker's free slots; <= 1000)
-- ARGV[3]  lease_ms             lease length; the worker renews it by heartbeat
-- ARGV[4]  worker               worker ID, recorded in the job
-- ARGV[5]  token prefix         unique per call; the lease token is token prefix .. ":" .. n
-- Returns  an array with one entry per claimed job: the job's hash as a flat
--          field/value array (HGETALL, read before this claim's writes) followed by the
--          fields the claim set (a later pair overrides an earlier one) and "id", id.
--          Empty when the queue is paused or has nothing ready.
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
local deadline = now + lease_ms
local out, leased = {}, {}
for n, id in ipairs(ids) do
  local key = prefix .. id
  -- One read, one write per job: the hash is read whole (the worker needs it) and the
  -- attempt is counted from it, instead of EXISTS + HINCRBY + HGETALL.
  local job = redis.call('HGETALL', key)
  if #job > 0 then -- a hash that expired or was deleted leaves nothing to run
    local attempt = 1
    for i = 1, #job, 2 do
      if job[i] == 'attempt' then attempt = tonumber(job[i + 1]) + 1 end
    end
    local lease = token .. ':' .. n
    redis.call('HSET', key, 'attempt', attempt, 'state', 'active', 'started_at', now,
      'worker', worker, 'lease', lease)
    for _, v in ipairs({'attempt', attempt, 'state', 'active', 'started_at', now,
      'worker', worker, 'lease', lease, 'id', id}) do
      table.insert(job, v)
    end
    table.insert(out, job)
    table.insert(leased, deadline)
    table.insert(leased, id)
  end
end
if #leased > 0 then redis.call('ZADD', active, unpack(leased)) end
return out
