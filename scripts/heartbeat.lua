-- heartbeat: renew the leases of a worker's active jobs (active -> active).
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  lease_ms             new deadline = now + lease_ms
-- ARGV[3+2k], ARGV[4+2k]        id, lease token: one pair per job (<= 1000, queue.MaxBatch)
-- Returns  {lost, cancelled}: the lease tokens that are lost (the job's token is another,
--          or the job is gone: their runs must stop, and nothing of theirs will be
--          accepted), and the tokens of jobs an operator cancelled (`jobs cancel`: their
--          runs must stop). Tokens, not IDs: one worker may briefly hold two runs of a job.
-- Clock    Redis TIME.
-- Invariant a lease is renewed only with its token.

local active, prefix, lease_ms = KEYS[1], ARGV[1], tonumber(ARGV[2])
local deadline = now_ms() + lease_ms
local lost, cancelled, renewed, ids = {}, {}, {}, {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local job = redis.call('HMGET', prefix .. id, 'lease', 'cancel')
  if holds(job[1], ARGV[i + 1]) then
    table.insert(ids, id)
    table.insert(renewed, deadline)
    table.insert(renewed, id)
    if job[2] then table.insert(cancelled, ARGV[i + 1]) end
  else
    table.insert(lost, ARGV[i + 1])
  end
end
if #ids > 0 then
  -- ZREM before ZADD, not ZADD XX alone: Redis at maxmemory (noeviction) refuses a script's
  -- first change if it is a deny-oom command such as ZADD, and a refused heartbeat would
  -- let healthy jobs' leases expire while Redis is full. ZREM frees first, so the ZADD that
  -- puts the same members back is allowed; nobody sees the gap (the script is atomic).
  redis.call('ZREM', active, unpack(ids))
  redis.call('ZADD', active, unpack(renewed))
end
return {lost, cancelled}
