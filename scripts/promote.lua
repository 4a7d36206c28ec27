-- promote: scheduled -> ready and retry -> ready, for jobs whose run_at has come.
--
-- KEYS[1]  jobs:{q}:scheduled   ZSET  job ID -> run_at (ms)
-- KEYS[2]  jobs:{q}:retry       ZSET  job ID -> run_at (ms)
-- KEYS[3]  jobs:{q}:ready       LIST  job IDs ready to run
-- KEYS[4]  jobs:{q}:wake        LIST  wake tokens: one 'r' per job moved
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  limit                most jobs moved from each set in this call
-- Returns  {moved, next_ms}: jobs moved, and ms until the earliest job left in either
--          set is due (0 when more are due already, -1 when both sets are empty).
-- Clock    Redis TIME.
-- Invariant a job is in exactly one of scheduled, retry, ready after the call.

local scheduled, retry, ready, wakes = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, limit = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local moved = 0
for _, set in ipairs({scheduled, retry}) do
  local due = redis.call('ZRANGEBYSCORE', set, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(due) do
    redis.call('ZREM', set, id)
    local key = prefix .. id
    -- A hash that expired or was deleted leaves nothing to run.
    local lkey = redis.call('HMGET', key, 'state', 'limit_key')
    if lkey[1] then
      redis.call('HSET', key, 'state', 'ready')
      push_ready(ready, prefix, id, lkey[2], false, now)
      moved = moved + 1
    end
  end
end
wake(wakes, moved, 'r')
local next_ms = -1
for _, set in ipairs({scheduled, retry}) do
  local head = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if head[2] then
    local wait = tonumber(head[2]) - now
    if wait < 0 then wait = 0 end
    if next_ms < 0 or wait < next_ms then next_ms = wait end
  end
end
return {moved, next_ms}
