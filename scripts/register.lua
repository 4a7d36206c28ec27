-- register: a worker's or scheduler's beat in the registry of live processes (`jobs
-- workers`): creates or renews its entry, and hands it any order an operator left there.
-- One script for the hash and the index, so a reader never finds one without the other
-- for longer than the hash's TTL, and the index is pruned by the processes that write it:
-- it never holds more than the live processes plus those dead for under one TTL, however
-- many start and stop, and nobody has to run a sweeper.
--
-- KEYS[1]  jobs:{registry}:processes     ZSET  process ID -> expiry (ms)
-- KEYS[2]  jobs:{registry}:process:<id>  HASH  the process's entry (KEYS.md lists its fields)
-- ARGV[1]  id                  the process ID (the index member)
-- ARGV[2]  ttl_ms              the entry expires ttl_ms after this beat (3 beats)
-- ARGV[3]  started_at          ms, Redis's clock, from the reply to the first beat; "0" on
--                              the first beat: now (a Redis that lost its data gets the
--                              first start back on the next beat)
-- ARGV[4+2k], ARGV[5+2k]       field, value: kind, host, pid, version, queues (JSON),
--                              types (JSON), concurrency, busy, state
-- Returns  {order, started_at}: the order an operator left ("quiet", "stop" or ""), and
--          the entry's started_at (ms).
-- Clock    Redis TIME: beat_at, started_at, the expiry score.
-- Invariant an index member's score is its hash's expiry; members past it are removed.

local index, entry = KEYS[1], KEYS[2]
local id, ttl_ms, started = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
if started <= 0 then started = now end
-- Removals first: Redis at maxmemory (noeviction) refuses a script's first change if it
-- may grow memory, and the entry's own ZREM frees before the ZADD that puts it back.
redis.call('ZREMRANGEBYSCORE', index, '-inf', now)
redis.call('ZREM', index, id)
local order = redis.call('HGET', entry, 'order') or ''
local fields = {'beat_at', now, 'started_at', started}
for i = 4, #ARGV, 2 do
  table.insert(fields, ARGV[i])
  table.insert(fields, ARGV[i + 1])
end
redis.call('HSET', entry, unpack(fields))
redis.call('PEXPIRE', entry, ttl_ms)
redis.call('ZADD', index, now + ttl_ms, id)
return {order, started}
