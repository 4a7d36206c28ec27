-- ackclaim: ack (active -> done, or dead for a cancelled job) then claim (ready -> active)
-- in one call, for a worker whose slots freed up: it reports the jobs that freed them and
-- refills the slots in one round trip. Each half is exactly ack.lua's and claim.lua's
-- (the lib's ack_jobs and claim_jobs).
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[2]  jobs:{q}:done        ZSET  job ID -> finished_at (ms), trimmed by age and count
-- KEYS[3]  jobs:{q}:ready       LIST  job IDs ready to run (RPOP: oldest first)
-- KEYS[4]  jobs:{q}:paused      STRING present while the queue is paused
-- KEYS[5]  jobs:{q}:dead        ZSET  job ID -> died_at (ms), for cancelled jobs
-- KEYS[6]  jobs:{q}:events      STREAM the events of each call that settled or claimed a job: a
--                               line per acked job (done, or dead when cancelled), then one
--                               per claimed job (started), in that order
-- KEYS[7]  jobs:{q}:limit       HASH  the queue's limits (limit.lua); claims write its tat
-- KEYS[8]  jobs:{q}:wake        LIST  'r' tokens for slots the acks freed that the claim left
--                               free, when the queue has a concurrency limit (wake_freed)
-- Keys     named from ARGV[1] ("jobs:{q}:", see the lib's keyed jobs), for keyed jobs:
--          jobs:{q}:keys (ZSET, the ring of keys with ready jobs), and of each key K met,
--          jobs:{q}:kready:K (LIST), jobs:{q}:kactive:K (ZSET of leases, while KEYS[7]'s
--          ktrack is set), jobs:{q}:ktat:K (STRING, the key's GCRA tat)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  stats prefix         "jobs:{q}:stats:" (daily processed and failed counters)
-- ARGV[3]  retention_ms         done jobs are kept this long (<= 0: deleted at once)
-- ARGV[4]  done_max             and at most this many (the oldest go first)
-- ARGV[5]  count                most jobs to claim (0: ack only; <= 1000)
-- ARGV[6]  lease_ms             lease length of the claimed jobs
-- ARGV[7]  worker               worker ID, recorded in the claimed jobs
-- ARGV[8]  token prefix         unique per call; a lease token is token prefix .. ":" .. k
-- ARGV[9]  dead_retention_ms    a cancelled job's hash expires this long after it died
-- ARGV[10] dead_max             the dead set keeps at most this many jobs
-- ARGV[11] events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: no events written)
-- ARGV[12] waiter              "" (most calls), or the worker's waiter member
--                               "<lease_ms>\t<token prefix>\t<worker>" (see the hand-offs in
--                               scripts/lib): its hand list jobs:{q}:hand:<worker> (LIST) is
--                               drained into the reply, and it is registered in
--                               jobs:{q}:waiters (ZSET, PEXPIRE waiter_ms) when the claim
--                               ran the queue dry (count > 0, fewer jobs than asked, no
--                               limit cut it short), else taken out
-- ARGV[13] waiter_ms            the registration's life from now (ms): the wait's length
--                               and a margin
-- ARGV[14] hints                one character per job to ack: '1' when the caller's copy of
--                               it, from its claim, had none of unique_key, batch and
--                               limit_key (its ack reads fewer fields), else anything
--                               (ack_jobs in scripts/lib)
-- ARGV[15+3k .. 17+3k]          id, lease token, result: one group per job to ack (<= 1000)
-- Returns  {acks, now, limit, job, job, ..., hand, hand, ...}: acks has one integer per
--          acked job, as ack.lua's (1 done, 2 done already by this lease, 3 cancelled:
--          dead, 0 lease lost); now (in microseconds), limit and the jobs are claim.lua's
--          reply; each hand is a string: a job handed to the worker (hand_entry in
--          scripts/lib), already claimed for it by an enqueue, oldest first.
-- Clock    Redis TIME, read once: the acks' finished_at and the claims' started_at in ms,
--          now in microseconds (orders claims, as in claim.lua).
-- Invariant as ack.lua and claim.lua: only the holder of a job's current lease token can
--          finish it, and a claimed job's new token is known only to its claimer. The acks
--          come first, so the first write is their ZREM from active and they go through on
--          a full Redis (maxmemory, noeviction); the events (one XADD, deny-oom) come
--          after that first write, so they never make the call fail where it succeeded
--          without.

local us, now = now_us()
local active, prefix = KEYS[1], ARGV[1]
local k = {active = active, done = KEYS[2], dead = KEYS[5], ev = event_buf(KEYS[6], tonumber(ARGV[11])),
  prefix = prefix, stats = ARGV[2], retention = tonumber(ARGV[3]), retention_s = ARGV[3], done_max = tonumber(ARGV[4]),
  dead_retention = tonumber(ARGV[9]), dead_max = tonumber(ARGV[10]), wakes = KEYS[8], track = {limit = KEYS[7]}}
local acks = ack_jobs(k, now, ARGV, 15, ARGV[14])
-- The limits as the acks read them, if they did (a keyed job's): the acks change none.
local out, limit, conc, running, bound = claim_jobs(KEYS[3], active, KEYS[4], KEYS[7], prefix, tonumber(ARGV[5]),
  tonumber(ARGV[6]), ARGV[7], ARGV[8], now, us, k.ev, k.track.l)
wake_freed(KEYS[7], active, KEYS[3], KEYS[8], k.freed, #out, now, conc, running, bound)
write_events(k.ev)
if ARGV[12] ~= '' then
  local n = tonumber(ARGV[5])
  local hand = waiter_claimed(key_base(prefix), ARGV[12], ARGV[7], n > 0 and #out < n and limit[2] == 0,
    now, tonumber(ARGV[13]))
  for _, e in ipairs(hand) do out[#out + 1] = e end
end
table.insert(out, 1, limit)
table.insert(out, 1, us)
table.insert(out, 1, acks)
return out
