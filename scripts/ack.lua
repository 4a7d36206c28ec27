-- ack: active -> done, for jobs whose handler succeeded; active -> dead for those an
-- operator cancelled meanwhile (`jobs cancel`: a cancel is final).
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[2]  jobs:{q}:done        ZSET  job ID -> finished_at (ms), trimmed by age and count
-- KEYS[3]  jobs:{q}:dead        ZSET  job ID -> died_at (ms), for cancelled jobs
-- KEYS[4]  jobs:{q}:events      STREAM the events of each call that settled a job: a line per job,
--                               done, or dead (cancelled)
-- KEYS[5]  jobs:{q}:limit       HASH  the queue's limits (read: concurrency, and ktrack for a
--                               keyed job)
-- KEYS[6]  jobs:{q}:ready       LIST  read (LLEN): are jobs waiting for the freed slots?
-- KEYS[7]  jobs:{q}:wake        LIST  an 'r' token per slot freed, when the queue has a
--                               concurrency limit and jobs are ready (wake_freed), and one
--                               per key its limits held back that a freed slot brings
--                               forward (key_freed)
-- Keys     of a keyed job's limit key K (named from ARGV[1], see scripts/lib), while the keys'
--          leases are kept (KEYS[5]'s ktrack): jobs:{q}:kactive:K (its lease removed) and
--          jobs:{q}:keys (K brought forward: key_freed)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  stats prefix         "jobs:{q}:stats:" (daily processed and failed counters)
-- ARGV[3]  retention_ms         done jobs are kept this long (<= 0: deleted at once)
-- ARGV[4]  done_max             and at most this many (the oldest go first)
-- ARGV[5]  dead_retention_ms    a cancelled job's hash expires this long after it died
-- ARGV[6]  dead_max             the dead set keeps at most this many jobs
-- ARGV[7]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: no events written)
-- ARGV[8]  hints                one character per job: '1' when the caller's copy of it, from
--                               its claim, had none of unique_key, batch and limit_key (its
--                               ack reads fewer fields), else anything (ack_jobs in
--                               scripts/lib)
-- ARGV[9+3k .. 11+3k]           id, lease token, result: one group per job (<= 1000)
-- Returns  one integer per job: 1 done; 2 done already, by this same lease (a resent ack:
--          nothing changed); 3 cancelled by an operator, so dead instead (a resent ack
--          gets 3 again); 0 lease lost (nothing changed for that job). A job acked with
--          retention <= 0 is deleted, so its resent ack reads as 0.
-- Clock    Redis TIME.
-- Invariant only the holder of the current lease token can finish a job, so a worker whose
--          lease expired and whose job was claimed again cannot overwrite the new run;
--          a job with the cancel flag never ends done. A unique job's key is released
--          (see enqueue.lua) unless it asked to keep it. The first write is the ZREM from
--          active (see ack_jobs in scripts/lib): acks go through on a full Redis; the call's
--          events are written in the same call, after it, so an event exists
--          exactly for each ack that committed.

local k = {active = KEYS[1], done = KEYS[2], dead = KEYS[3], ev = event_buf(KEYS[4], tonumber(ARGV[7])),
  prefix = ARGV[1], stats = ARGV[2], retention = tonumber(ARGV[3]), retention_s = ARGV[3], done_max = tonumber(ARGV[4]),
  dead_retention = tonumber(ARGV[5]), dead_max = tonumber(ARGV[6]), wakes = KEYS[7], track = {limit = KEYS[5]}}
local now = now_ms()
local out = ack_jobs(k, now, ARGV, 9, ARGV[8])
wake_freed(KEYS[5], KEYS[1], KEYS[6], KEYS[7], k.freed, 0, now)
write_events(k.ev)
return out
