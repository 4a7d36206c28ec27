-- ack: active -> done, for jobs whose handler succeeded.
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[2]  jobs:{q}:done        ZSET  job ID -> finished_at (ms), trimmed by age and count
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  stats prefix         "jobs:{q}:stats:" (daily processed counter)
-- ARGV[3]  retention_ms         done jobs are kept this long (<= 0: deleted at once)
-- ARGV[4]  done_max             and at most this many (the oldest go first)
-- ARGV[5+3k .. 7+3k]            id, lease token, result: one group per job (<= 1000)
-- Returns  one integer per job: 1 done; 2 done already, by this same lease (a resent ack:
--          nothing changed); 0 lease lost (nothing changed for that job). A job acked with
--          retention <= 0 is deleted, so its resent ack reads as 0.
-- Clock    Redis TIME.
-- Invariant only the holder of the current lease token can finish a job, so a worker whose
--          lease expired and whose job was claimed again cannot overwrite the new run.
--          A unique job's key is released (see enqueue.lua) unless it asked to keep it.
--          The first write is the ZREM from active (see ack_jobs in lib.lua): acks go
--          through on a full Redis.

return ack_jobs(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]),
  now_ms(), ARGV, 5)
