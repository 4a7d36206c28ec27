-- depths: counts a queue's jobs in each waiting or running state, in one step
-- (Client.Depths: the worker's jobs_queue_depth, jobstest.Drain). Changes nothing; a script
-- so that the counts are one snapshot (a job moving between two states while they are
-- read would otherwise be counted in neither, or twice) without MULTI: Redis 7 refuses
-- every command queued in a MULTI while it is over maxmemory, while a script that writes
-- nothing runs (its first deny-oom command would be refused, and it has none), so the
-- depths stay readable on a full Redis.
--
-- KEYS[1]  jobs:{q}:ready      LIST
-- KEYS[2]  jobs:{q}:scheduled  ZSET
-- KEYS[3]  jobs:{q}:active     ZSET
-- KEYS[4]  jobs:{q}:retry      ZSET
-- KEYS[5]  jobs:{q}:dead       ZSET
-- KEYS[6]  jobs:{q}:waiting    ZSET
-- KEYS[7]  jobs:{q}:keys       ZSET  the ring of limit keys with jobs ready
-- ARGV[]   none
-- Returns  {ready, scheduled, active, retry, dead, waiting, keys}: LLEN and ZCARDs.
-- Clock    none.
-- Invariant read only.

return {
  redis.call('LLEN', KEYS[1]),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]),
  redis.call('ZCARD', KEYS[5]),
  redis.call('ZCARD', KEYS[6]),
  redis.call('ZCARD', KEYS[7]),
}
