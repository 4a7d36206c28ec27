-- lib.lua: prepended to every script by scripts.go, so a transition's file holds only its
-- own logic. Nothing here touches a key by itself.
--
-- The clock is Redis's (TIME), never a client's: leases, due times and reaping are judged
-- by one clock however skewed the workers' clocks are.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- release_unique deletes the unique key a finished job holds (its hash's unique_key field),
-- unless the job asked to keep it until its TTL, or the key now belongs to another job.
local function release_unique(key, id)
  local u = redis.call('HMGET', key, 'unique_key', 'unique_keep')
  if u[1] and not u[2] and redis.call('GET', u[1]) == id then
    redis.call('DEL', u[1])
  end
end

-- to_dead moves a job to the dead set (it is already out of every other set), expires its
-- hash after retention_ms, and keeps the dead set to entries younger than retention_ms and
-- at most dead_max of them, deleting the hashes of the entries it drops.
local function to_dead(dead, job_prefix, id, now, retention_ms, dead_max)
  local key = job_prefix .. id
  release_unique(key, id)
  redis.call('HSET', key, 'state', 'dead', 'finished_at', now)
  redis.call('HDEL', key, 'lease')
  redis.call('PEXPIRE', key, retention_ms)
  redis.call('ZADD', dead, now, id)
  local old = redis.call('ZRANGEBYSCORE', dead, '-inf', now - retention_ms, 'LIMIT', 0, 100)
  local over = redis.call('ZCARD', dead) - dead_max
  if over > 0 then
    local oldest = redis.call('ZRANGE', dead, 0, over - 1)
    for _, v in ipairs(oldest) do table.insert(old, v) end
  end
  for _, v in ipairs(old) do
    redis.call('ZREM', dead, v)
    if v ~= id then redis.call('DEL', job_prefix .. v) end
  end
end

-- wake pushes up to n tokens (at most 64) on the wake list that idle workers block on, and
-- trims the list so tokens nobody waited for cannot pile up while workers are busy.
-- token says what woke them: 'r' a job is ready (claim), 's' a job was scheduled or set
-- to retry (promote first, then plan the wait until it is due).
local function wake(key, n, token)
  if n <= 0 then return end
  if n > 64 then n = 64 end
  local t = {}
  for i = 1, n do t[i] = token end
  redis.call('LPUSH', key, unpack(t))
  redis.call('LTRIM', key, 0, 127)
end
