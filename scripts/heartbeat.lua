-- heartbeat: renew the leases of a worker's active jobs (active -> active).
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  lease_ms             new deadline = now + lease_ms
-- ARGV[3+2k], ARGV[4+2k]        id, lease token: one pair per job
-- Returns  {lost, cancelled}: the IDs whose lease is lost (token no longer matches, or the
--          job is gone: their handlers must stop, and nothing of theirs will be accepted),
--          and the IDs an operator cancelled (`jobs cancel`: their handlers must stop).
-- Clock    Redis TIME.
-- Invariant a lease is renewed only with its token.

local active, prefix, lease_ms = KEYS[1], ARGV[1], tonumber(ARGV[2])
local deadline = now_ms() + lease_ms
local lost, cancelled = {}, {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local job = redis.call('HMGET', prefix .. id, 'lease', 'cancel')
  if job[1] == ARGV[i + 1] then
    redis.call('ZADD', active, 'XX', deadline, id)
    if job[2] then table.insert(cancelled, id) end
  else
    table.insert(lost, id)
  end
end
return {lost, cancelled}
