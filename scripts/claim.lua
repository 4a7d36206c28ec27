-- claim: ready -> active, up to ARGV[2] jobs, each under a new lease.
--
-- KEYS[1]  jobs:{q}:ready       LIST  job IDs ready to run (RPOP: oldest first)
-- KEYS[2]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[3]  jobs:{q}:paused      STRING present while the queue is paused
-- KEYS[4]  jobs:{q}:events      STREAM the events of each call that claimed jobs: a 'started' line
--                               per claimed job, in claim order
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  count                most jobs to claim (the worker's free slots; <= 1000)
-- ARGV[3]  lease_ms             lease length; the worker renews it by heartbeat
-- ARGV[4]  worker               worker ID, recorded in the job
-- ARGV[5]  token prefix         unique per call; the lease token is token prefix .. ":" .. k
-- ARGV[6]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none written). The first write is the
--                               RPOP, so the events go through on a full Redis whenever the
--                               claim does.
-- Returns  {now_us, job, job, ...}: now_us is Redis TIME in microseconds, the jobs' start
--          (their hash's started_at is the same instant in ms); each job is its hash as a
--          flat field/value array (HGETALL, read before this claim's writes) followed by
--          its ID, its attempt (this run's) and k. The claim also set state = active and
--          worker. Just {now_us} when the queue is paused or has nothing ready.
-- Clock    Redis TIME, read once. now_us orders claims: no two scripts share a
--          microsecond (Redis runs one script at a time, and each takes longer than 1us),
--          so of two claims in flight the one with the smaller now_us ran first (unless
--          the server's clock is stepped back between them).
-- Invariant a claimed job is in active with a lease token that only its claimer knows;
--          heartbeat, ack, fail and handback change nothing without that token.

local us, now = now_us()
local ev = event_buf(KEYS[4], tonumber(ARGV[6]))
local out = claim_jobs(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2]),
  tonumber(ARGV[3]), ARGV[4], ARGV[5], now, ev)
write_events(ev)
table.insert(out, 1, us)
return out
