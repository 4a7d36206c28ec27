-- heartbeat: renew the leases of a worker's active jobs (active -> active), and store the
-- progress their handlers reported (worker.Progress, an exec handler's fd 3).
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  lease_ms             new deadline = now + lease_ms
-- ARGV[3]  p                    how many of the jobs below carry progress (they come first)
-- ARGV[4+4k .. 7+4k]            id, lease token, percent (0-100), message: one group per
--                               job with progress (k < p)
-- then ARGV[...+2k], [...+2k+1] id, lease token: one pair per other job
--                               (<= 1000 jobs in all, queue's proto.MaxBatch)
-- Keys     named from ARGV[1] ("jobs:{q}:", see the lib's keyed jobs): jobs:{q}:limit (HASH,
--          read: ktrack) and, while its ktrack is '1', jobs:{q}:kactive:K (ZSET, ZADD XX)
--          of each keyed job renewed
-- Returns  {lost, cancelled}: the lease tokens that are lost (the job's token is another,
--          its lease deadline passed, or the job is gone: their runs must stop, and nothing of theirs will be
--          accepted, progress included), and the tokens of jobs an operator cancelled
--          (`jobs cancel`: their runs must stop). Tokens, not IDs: one worker may briefly
--          hold two runs of a job.
-- Clock    Redis TIME: the deadline and progress_at.
-- Invariant a lease is renewed, and progress written, only with the job's current token
--          and before its deadline: a worker that lost the lease cannot overwrite what the
--          new run reports, and an expired lease never comes back (so unexpired leases
--          never exceed a queue's concurrency limit). The
--          first write is the ZREM from active (see below), then the progress HSETs.

local active, prefix, lease_ms, p = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local deadline = now + lease_ms
local lost, cancelled, renewed, ids, progress, keyed = {}, {}, {}, {}, {}, {}

-- A lease whose deadline has passed is lost too, though its token still matches: reap
-- may take the job at any moment, and its slot already counts as free to a queue's
-- concurrency limit (claims count unexpired leases), so renewing it could put the queue
-- over its limit. Lost, it is the same whether the reap or the heartbeat runs first.
local function renew(id, token)
  local job = redis.call('HMGET', prefix .. id, 'lease', 'cancel', 'limit_key')
  local d = tonumber(redis.call('ZSCORE', active, id))
  if not holds(job[1], token) or not d or d <= now then
    table.insert(lost, token)
    return false
  end
  table.insert(ids, id)
  table.insert(renewed, deadline)
  table.insert(renewed, id)
  if job[2] then table.insert(cancelled, token) end
  if job[3] then table.insert(keyed, {job[3], id}) end
  return true
end

local first = 4 + 4 * p
for i = 4, first - 1, 4 do
  if renew(ARGV[i], ARGV[i + 1]) then table.insert(progress, i) end
end
for i = first, #ARGV, 2 do renew(ARGV[i], ARGV[i + 1]) end
if #ids > 0 then
  -- ZREM before ZADD, not ZADD XX alone: Redis at maxmemory (noeviction) refuses a script's
  -- first change if it is a deny-oom command such as ZADD, and a refused heartbeat would
  -- let healthy jobs' leases expire while Redis is full. ZREM frees first, so the ZADD that
  -- puts the same members back is allowed; nobody sees the gap (the script is atomic).
  redis.call('ZREM', active, unpack(ids))
  redis.call('ZADD', active, unpack(renewed))
end
-- A keyed job's lease under its key (what the key's concurrency counts) moves with it,
-- while the keys' leases are kept (the limits' ktrack flag, see limit.lua).
if #keyed > 0 and key_tracked({limit = key_base(prefix) .. 'limit'}) then
  for _, kj in ipairs(keyed) do
    redis.call('ZADD', key_base(prefix) .. 'kactive:' .. kj[1], 'XX', deadline, kj[2])
  end
end
for _, i in ipairs(progress) do
  redis.call('HSET', prefix .. ARGV[i], 'progress', ARGV[i + 2], 'progress_msg', ARGV[i + 3], 'progress_at', now)
end
return {lost, cancelled}
