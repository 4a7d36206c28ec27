-- limits: reads a queue's limits and where it stands against them (`jobs limit ls`,
-- Client.Limits, `jobs stats`). Changes nothing; a script only so that the running count
-- and the times are judged by Redis's clock, in one step.
--
-- KEYS[1]  jobs:{q}:limit       HASH  concurrency, rate, period_ms, burst, tat (limit.lua)
-- KEYS[2]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- ARGV[]   none
-- Returns  {now_ms, concurrency, rate, period_ms, burst, tat_us, running, first_deadline_ms}:
--          a missing limit or tat is 0; running counts the unexpired leases (what the
--          concurrency limit counts); first_deadline_ms is the earliest unexpired lease
--          deadline (0: none).
-- Clock    Redis TIME.
-- Invariant read only.

local now = now_ms()
local l = redis.call('HMGET', KEYS[1], 'concurrency', 'rate', 'period_ms', 'burst', 'tat')
local running = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
local first = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
return {now, tonumber(l[1]) or 0, tonumber(l[2]) or 0, tonumber(l[3]) or 0, tonumber(l[4]) or 0,
  l[5] or '0', running, tonumber(first[2]) or 0}
