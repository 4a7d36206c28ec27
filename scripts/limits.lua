-- limits: reads a queue's limits and where it stands against them (`jobs limit ls`,
-- Client.Limits, `jobs stats`). Changes nothing; a script only so that the running count
-- and the times are judged by Redis's clock, in one step.
--
-- KEYS[1]  jobs:{q}:limit       HASH  concurrency, rate, period_ms, burst, tat, key, key:<K>
--                               (limit.lua)
-- KEYS[2]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- Keys     named from KEYS[2]'s ("jobs:{q}:", see the lib's keyed jobs): jobs:{q}:keys
--          (ZSET, the ring of keys with ready jobs), and of each key K reported,
--          jobs:{q}:kactive:K (ZSET) and jobs:{q}:ktat:K (STRING); while the keys' leases
--          are not kept (key_flags in scripts/lib: the limits' ktrack is not '1'), jobs:{q}:job:<id>
--          of each unexpired lease in active instead (read: limit_key; O(jobs running))
-- ARGV[]   limit keys to report besides those below (a job's key, for `jobs inspect`)
-- Returns  {now_ms, concurrency, rate, period_ms, burst, tat_us, running, first_deadline_ms,
--          key_default, keys_waiting, key, key...}: a missing limit or tat is 0; running
--          counts the unexpired leases (what the concurrency limit counts);
--          first_deadline_ms is the earliest unexpired lease deadline (0: none).
--          key_default is the default limits of every key ("concurrency rate period_ms
--          burst", "" for none); keys_waiting how many keys have jobs ready. Then one
--          array per key reported -- the keys with their own limits (at most 100), the
--          keys of ARGV, and the first 20 keys of the ring, in ring order -- each {K, own_limits ("" for none),
--          running, first_deadline_ms, tat_us, due_us (when the ring lets it run next;
--          -1: no job ready)}.
-- Clock    Redis TIME.
-- Invariant read only.

local now = now_ms()
local l = redis.call('HMGET', KEYS[1], 'concurrency', 'rate', 'period_ms', 'burst', 'tat', 'key', 'ktrack', 'kflags')
local running = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
local first = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local base = string.sub(KEYS[2], 1, -7)
local ring = base .. 'keys'
local out = {now, tonumber(l[1]) or 0, tonumber(l[2]) or 0, tonumber(l[3]) or 0, tonumber(l[4]) or 0,
  l[5] or '0', running, tonumber(first[2]) or 0, l[6] or '', redis.call('ZCARD', ring)}
local seen, order, own = {}, {}, {}
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, 4) == 'key:' and #order < 100 then
    local k = string.sub(f, 5)
    seen[k] = true
    order[#order + 1] = k
    own[k] = redis.call('HGET', KEYS[1], f)
  end
end
for _, k in ipairs(ARGV) do
  if not seen[k] then
    seen[k] = true
    order[#order + 1] = k
  end
end
for _, k in ipairs(redis.call('ZRANGE', ring, 0, 19)) do
  if not seen[k] then
    seen[k] = true
    order[#order + 1] = k
  end
end
-- Without the keys' leases (no key concurrency could bind), the reported keys' running
-- jobs and earliest deadlines are counted from active's unexpired leases.
local n, firsts = {}, {}
local tracked = key_flags(KEYS[1], l[7], nil, l[8])
if not tracked and #order > 0 then
  local leases = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #leases, 2 do
    local k = redis.call('HGET', base .. 'job:' .. leases[i], 'limit_key')
    if k and seen[k] then
      n[k] = (n[k] or 0) + 1
      firsts[k] = firsts[k] or tonumber(leases[i + 1])
    end
  end
end
for _, k in ipairs(order) do
  local running, first_at = n[k] or 0, firsts[k] or 0
  if tracked then
    local act = base .. 'kactive:' .. k
    local f = redis.call('ZRANGEBYSCORE', act, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    running, first_at = redis.call('ZCOUNT', act, '(' .. now, '+inf'), tonumber(f[2]) or 0
  end
  local due = redis.call('ZSCORE', ring, k)
  out[#out + 1] = {k, own[k] or '', running, first_at, redis.call('GET', base .. 'ktat:' .. k) or '0', tonumber(due) or -1}
end
return out
