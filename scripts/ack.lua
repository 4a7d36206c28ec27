-- ack: active -> done, for jobs whose handler succeeded.
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  retention_ms         the done job's hash expires after this (0: deleted now)
-- ARGV[3+3k .. 5+3k]            id, lease token, result: one group per job
-- Returns  one integer per job: 1 done, 0 lease lost (nothing changed for that job).
-- Clock    Redis TIME.
--          A unique job's key is released (see enqueue.lua) unless it asked to keep it.
-- Invariant only the holder of the current lease token can finish a job, so a worker whose
--          lease expired and whose job was claimed again cannot overwrite the new run.

local active, prefix, retention = KEYS[1], ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local out = {}
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  local key = prefix .. id
  if redis.call('HGET', key, 'lease') ~= ARGV[i + 1] then
    table.insert(out, 0)
  else
    redis.call('ZREM', active, id)
    release_unique(key, id)
    if retention <= 0 then
      redis.call('DEL', key)
    else
      redis.call('HSET', key, 'state', 'done', 'finished_at', now, 'result', ARGV[i + 2])
      redis.call('HDEL', key, 'lease')
      redis.call('PEXPIRE', key, retention)
    end
    table.insert(out, 1)
  end
end
return out
