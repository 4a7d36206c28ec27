-- order: an operator's `jobs workers quiet|stop ID` leaves an order in a live process's
-- registry entry; the process reads it in the reply to its next beat (no polling: it
-- beats anyway) and obeys within one beat.
--
-- KEYS[1]  jobs:{registry}:processes     ZSET  process ID -> expiry (ms)
-- KEYS[2]  jobs:{registry}:process:<id>  HASH  the process's entry
-- ARGV[1]  id                  the process ID
-- ARGV[2]  order               "quiet" or "stop"
-- Returns  the order now in force ("stop" stays "stop": a stopping process cannot be
--          made quiet), or "missing" when no live process has this ID.
-- Clock    Redis TIME: an entry whose expiry passed is not live.
-- Invariant only a live process's entry gets an order; nothing else is written.

local index, entry, id, order = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local expiry = redis.call('ZSCORE', index, id)
if not expiry or tonumber(expiry) <= now_ms() or redis.call('EXISTS', entry) == 0 then
  return 'missing'
end
if redis.call('HGET', entry, 'order') == 'stop' then
  return 'stop'
end
redis.call('HSET', entry, 'order', order)
return order
