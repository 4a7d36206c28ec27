-- handback: active -> ready, at the head of the list, for jobs a stopping worker could
-- not finish in time. The attempt is not counted: the job did not fail, the worker left.
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[2]  jobs:{q}:ready       LIST  job IDs ready to run (RPUSH: claimed next)
-- KEYS[3]  jobs:{q}:wake        LIST  wake tokens: one 'r' per job handed back
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2+2k], ARGV[3+2k]        id, lease token: one pair per job
-- Returns  one integer per job: 1 handed back, 0 lease lost (nothing changed).
-- Clock    none.
-- Invariant only the holder of the current lease token can hand a job back.

local active, ready, wakes, prefix = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local out, n = {}, 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local key = prefix .. id
  if redis.call('HGET', key, 'lease') ~= ARGV[i + 1] then
    table.insert(out, 0)
  else
    redis.call('ZREM', active, id)
    redis.call('HINCRBY', key, 'attempt', -1)
    redis.call('HSET', key, 'state', 'ready')
    redis.call('HDEL', key, 'lease')
    redis.call('RPUSH', ready, id)
    n = n + 1
    table.insert(out, 1)
  end
end
wake(wakes, n, 'r')
return out
