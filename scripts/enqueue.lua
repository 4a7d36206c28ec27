-- enqueue: new jobs -> ready (due now) or scheduled (due later). Many jobs per call.
--
-- KEYS[1]  jobs:{q}:ready       LIST  job IDs ready to run (LPUSH here, workers RPOP)
-- KEYS[2]  jobs:{q}:scheduled   ZSET  job ID -> run_at (ms)
-- KEYS[3]  jobs:{q}:wake        LIST  wake tokens: 'r' per ready job, one 's' if any was scheduled
-- ARGV[1]  job key prefix       "jobs:{q}:job:" (same hash tag as KEYS)
-- ARGV[2+12k .. 13+12k], one group per job:
--          id, type, payload (stored in 64-byte pieces up to 4 KiB, see below), max_retry, timeout_ms,
--          delay_ms (>= 0, from Redis's clock), at_ms (absolute ms; 0 = use delay_ms),
--          unique_key ("" = not unique; else the key jobs:{q}:unique:<k>), unique_ttl_ms,
--          unique_keep ("1": keep the key until its TTL, not just until the job finishes),
--          exclusive ("" = not exclusive; else the lock name workers run it under),
--          check ("1": the caller chose the ID, so it may exist; "": a fresh generated ID
--          (48-bit time + 80 random bits), which needs no existence check)
-- Returns  one entry per job, in order: 1 enqueued; 0 duplicate ID (a job with that ID
--          exists in this queue); or, for a unique job whose key is held, the ID of the
--          job holding it. Nothing is written for a duplicate. A WRONGTYPE error, writing
--          nothing at all, when a list or set of the queue holds another type.
-- Clock    Redis TIME; at_ms is the only client time and is taken as given.
-- Invariant a job hash and exactly one of ready/scheduled are written together, or nothing;
--          a unique key is taken in the same step, so of concurrent enqueues one wins.

local ready, scheduled, wakes = KEYS[1], KEYS[2], KEYS[3]
local prefix = ARGV[1]
-- Scripts are not rolled back on error: refuse a corrupted key before writing anything,
-- rather than leave job hashes that no list or set names.
for key, want in pairs({[ready] = 'list', [scheduled] = 'zset', [wakes] = 'list'}) do
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return redis.error_reply('WRONGTYPE ' .. key .. ' is a ' .. t .. ', not a ' .. want)
  end
end
local now = now_ms()
local out, ready_ids, due = {}, {}, {}
for i = 2, #ARGV, 12 do
  local id = ARGV[i]
  local key = prefix .. id
  local ukey = ARGV[i + 7]
  local holder = false
  if ukey ~= '' then holder = redis.call('GET', ukey) end
  if ARGV[i + 11] == '1' and redis.call('EXISTS', key) == 1 then
    table.insert(out, 0)
  elseif holder then
    table.insert(out, holder)
  else
    local at = tonumber(ARGV[i + 6])
    local run_at = at
    if at == 0 then run_at = now + tonumber(ARGV[i + 5]) end
    -- attempt is absent until the first claim (absent = 0): one field less per waiting job.
    local fields = {'type', ARGV[i + 1], 'max_retry', ARGV[i + 3], 'timeout_ms', ARGV[i + 4],
      'created_at', now}
    -- A hash whose values are all <= 64 bytes stays in Redis's compact listpack encoding
    -- (hash-max-listpack-value), about half the memory of the hashtable one. So a payload
    -- of up to 4 KiB is stored in 64-byte pieces: payload, payload+1, payload+2, ...
    local payload = ARGV[i + 2]
    if #payload <= 4096 then
      table.insert(fields, 'payload'); table.insert(fields, string.sub(payload, 1, 64))
      for n = 1, math.ceil(#payload / 64) - 1 do
        table.insert(fields, 'payload+' .. n)
        table.insert(fields, string.sub(payload, n * 64 + 1, n * 64 + 64))
      end
    else
      table.insert(fields, 'payload'); table.insert(fields, payload)
    end
    if ukey ~= '' then
      redis.call('SET', ukey, id, 'PX', ARGV[i + 8])
      table.insert(fields, 'unique_key'); table.insert(fields, ukey)
      if ARGV[i + 9] == '1' then table.insert(fields, 'unique_keep'); table.insert(fields, '1') end
    end
    if ARGV[i + 10] ~= '' then
      table.insert(fields, 'exclusive'); table.insert(fields, ARGV[i + 10])
    end
    if run_at > now then
      table.insert(fields, 'state'); table.insert(fields, 'scheduled')
      table.insert(fields, 'run_at'); table.insert(fields, run_at)
      redis.call('HSET', key, unpack(fields))
      table.insert(due, run_at)
      table.insert(due, id)
    else
      table.insert(fields, 'state'); table.insert(fields, 'ready')
      redis.call('HSET', key, unpack(fields))
      table.insert(ready_ids, id)
    end
    table.insert(out, 1)
  end
end
-- One LPUSH and one ZADD for the whole batch (in order: the first job is claimed first).
if #ready_ids > 0 then redis.call('LPUSH', ready, unpack(ready_ids)) end
if #due > 0 then redis.call('ZADD', scheduled, unpack(due)) end
wake(wakes, #ready_ids, 'r')
-- A scheduled job wakes one idle worker too, so it re-plans how long to wait.
wake(wakes, math.min(#due, 1), 's')
return out
