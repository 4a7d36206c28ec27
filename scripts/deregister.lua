-- deregister: a worker or scheduler that stops cleanly leaves the registry of live
-- processes at once, instead of three beats later when its entry would expire.
--
-- KEYS[1]  jobs:{registry}:processes     ZSET  process ID -> expiry (ms)
-- KEYS[2]  jobs:{registry}:process:<id>  HASH  the process's entry
-- ARGV[1]  id                  the process ID
-- Returns  1 if the process was listed, else 0.
-- Clock    none.
-- Invariant the index member and the hash go together.

local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return removed
