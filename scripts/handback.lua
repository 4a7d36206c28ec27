-- handback: active -> ready (at the head of the list) or -> scheduled (after a delay), for
-- jobs a worker gives back without running them to the end: it is stopping, or the job is
-- exclusive and its lock is held elsewhere. The attempt is not counted: the job did not
-- fail.
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[2]  jobs:{q}:ready       LIST  job IDs ready to run (RPUSH: claimed next)
-- KEYS[3]  jobs:{q}:scheduled   ZSET  job ID -> run_at (ms)
-- KEYS[4]  jobs:{q}:wake        LIST  wake tokens: 'r' per job made ready, one 's' if delayed
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  delay_ms             0: ready at once; > 0: scheduled that long from now
-- ARGV[3+2k], ARGV[4+2k]        id, lease token: one pair per job
-- Returns  one integer per job: 1 handed back, 0 lease lost (nothing changed). A hand back
--          resent after its reply was lost finds its own lease ended (ended_lease in
--          lib.lua) and returns 1 again, changing nothing.
-- Clock    Redis TIME (only when delay_ms > 0).
-- Invariant only the holder of the current lease token can hand a job back.

local active, ready, scheduled, wakes = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, delay = ARGV[1], tonumber(ARGV[2])
local run_at = 0
if delay > 0 then run_at = now_ms() + delay end
local out, n = {}, 0
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local key = prefix .. id
  local lease = redis.call('HGET', key, 'lease')
  if not holds(lease, ARGV[i + 1]) then
    if ended_outcome(lease, ARGV[i + 1]) == 'back' then table.insert(out, 1) else table.insert(out, 0) end
  else
    redis.call('ZREM', active, id)
    redis.call('HINCRBY', key, 'attempt', -1)
    local ended = ended_lease('back', ARGV[i + 1])
    if delay > 0 then
      redis.call('HSET', key, 'state', 'scheduled', 'run_at', run_at, 'lease', ended)
      redis.call('ZADD', scheduled, run_at, id)
    else
      redis.call('HSET', key, 'state', 'ready', 'lease', ended)
      redis.call('RPUSH', ready, id)
    end
    n = n + 1
    table.insert(out, 1)
  end
end
if delay > 0 then wake(wakes, math.min(n, 1), 's') else wake(wakes, n, 'r') end
return out
