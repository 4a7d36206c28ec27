-- claim: ready -> active, up to ARGV[2] jobs, each under a new lease, as many as the
-- queue's limits allow (concurrency and rate, jobs:{q}:limit: see limit_room in scripts/lib).
--
-- KEYS[1]  jobs:{q}:ready       LIST  job IDs ready to run (RPOP: oldest first)
-- KEYS[2]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[3]  jobs:{q}:paused      STRING present while the queue is paused
-- KEYS[4]  jobs:{q}:events      STREAM the events of each call that claimed jobs: a 'started' line
--                               per claimed job, in claim order
-- KEYS[5]  jobs:{q}:limit       HASH  the queue's limits (limit.lua); claims write its tat
-- Keys     named from ARGV[1] ("jobs:{q}:", see the lib's keyed jobs): jobs:{q}:keys
--          (ZSET, the ring of keys with ready jobs), and of each due key K,
--          jobs:{q}:kready:K (LIST: RPOP), jobs:{q}:kactive:K (ZSET of leases: ZADD, while
--          KEYS[5]'s ktrack is set),
--          jobs:{q}:ktat:K (STRING, the key's GCRA tat: SET PX)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  count                most jobs to claim (the worker's free slots; <= 1000)
-- ARGV[3]  lease_ms             lease length; the worker renews it by heartbeat
-- ARGV[4]  worker               worker ID, recorded in the job
-- ARGV[5]  token prefix         unique per call; the lease token is token prefix .. ":" .. k
-- ARGV[6]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none written). The first write is the
--                               RPOP, so the events go through on a full Redis whenever the
--                               claim does.
-- Returns  {now_us, limit, job, job, ...}: now_us is Redis TIME in microseconds; each job
--          is its hash as a flat field/value array (HGETALL, read before this claim's
--          writes) followed by its ID, its attempt (this run's), k and its start in us:
--          now_us, or on a queue with a rate (or, without one, a keyed job under its
--          key's rate) its token's instant, up to 20ms later (the worker holds the job
--          until then; see rate_ahead in scripts/lib). Its hash's
--          started_at is the start in ms. The claim also set state = active and
--          worker. limit is {concurrency, why, wait_us, free} (limit_reply in scripts/lib): the
--          queue's concurrency limit (0: none) and the slots this claim left free; and,
--          when a limit cut this claim short with jobs left in ready, why (1 concurrency,
--          2 rate, 3 every key with jobs waits on its own limits; else 0) and the wait in
--          us until the next slot or token. Just {now_us, limit} when the queue is paused or has
--          nothing ready, or its limits allow nothing now.
-- Clock    Redis TIME, read once. now_us orders claims: no two scripts share a
--          microsecond (Redis runs one script at a time, and each takes longer than 1us),
--          so of two claims in flight the one with the smaller now_us ran first (unless
--          the server's clock is stepped back between them).
-- Invariant a claimed job is in active with a lease token that only its claimer knows;
--          heartbeat, ack, fail and handback change nothing without that token. Unexpired
--          leases never exceed the queue's concurrency limit, and claims never outrun its
--          rate: both are checked and taken here, atomically with the claim.

local us, now = now_us()
local ev = event_buf(KEYS[4], tonumber(ARGV[6]))
local out, limit = claim_jobs(KEYS[1], KEYS[2], KEYS[3], KEYS[5], ARGV[1], tonumber(ARGV[2]),
  tonumber(ARGV[3]), ARGV[4], ARGV[5], now, us, ev)
write_events(ev)
table.insert(out, 1, limit)
table.insert(out, 1, us)
return out
