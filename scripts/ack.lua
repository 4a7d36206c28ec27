-- ack: active -> done, for jobs whose handler succeeded.
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[2]  jobs:{q}:done        ZSET  job ID -> finished_at (ms), trimmed by age and count
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  stats prefix         "jobs:{q}:stats:" (daily processed counter)
-- ARGV[3]  retention_ms         done jobs are kept this long (<= 0: deleted at once)
-- ARGV[4]  done_max             and at most this many (the oldest go first)
-- ARGV[5+3k .. 7+3k]            id, lease token, result: one group per job (<= 1000)
-- Returns  one integer per job: 1 done, 0 lease lost (nothing changed for that job).
-- Clock    Redis TIME.
-- Invariant only the holder of the current lease token can finish a job, so a worker whose
--          lease expired and whose job was claimed again cannot overwrite the new run.
--          A unique job's key is released (see enqueue.lua) unless it asked to keep it.

local active, done = KEYS[1], KEYS[2]
local prefix, stats = ARGV[1], ARGV[2]
local retention, done_max = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local out, finished, held, results, kept = {}, {}, {}, {}, {}
for i = 5, #ARGV, 3 do
  local job = redis.call('HMGET', prefix .. ARGV[i], 'lease', 'unique_key', 'unique_keep')
  if ARGV[i + 1] == '' or job[1] ~= ARGV[i + 1] then
    table.insert(out, 0)
  else
    table.insert(finished, ARGV[i])
    table.insert(held, job)
    table.insert(results, ARGV[i + 2])
    table.insert(out, 1)
  end
end
if #finished == 0 then return out end
-- The first write must free memory, not grow it: Redis at maxmemory (noeviction) refuses a
-- script's deny-oom command (HSET, ZADD) only while the script has changed nothing, so
-- removing the jobs from active first lets acks through when Redis is full (they free
-- memory), instead of leaving the jobs to expire and burn their retries.
redis.call('ZREM', active, unpack(finished))
for n, id in ipairs(finished) do
  local key = prefix .. id
  release_held(held[n][2], held[n][3], id)
  if retention <= 0 then
    redis.call('DEL', key)
  else
    -- An empty lease matches no token: cheaper than a separate HDEL.
    redis.call('HSET', key, 'state', 'done', 'finished_at', now, 'result', results[n], 'lease', '')
    redis.call('PEXPIRE', key, retention)
    table.insert(kept, now)
    table.insert(kept, id)
  end
end
if #kept > 0 then
  redis.call('ZADD', done, unpack(kept))
  trim(done, prefix, now, retention, done_max, 'done')
end
count(stats, 'processed', now, #finished)
return out
