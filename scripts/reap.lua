-- reap: active -> ready (at the head: next to be claimed) or dead, for jobs whose lease
-- expired: their worker died or lost Redis and stopped renewing. The attempt counts, so a
-- job that kills every worker that runs it still ends dead after max_retry attempts.
-- The head, not the tail, because such a job already waited its turn once: after a crash
-- its next run should not wait behind the whole backlog (BullMQ does the same with stalled
-- jobs). A handed-back job goes to the head for the same reason.
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[2]  jobs:{q}:ready       LIST  job IDs ready to run (RPUSH: the head, claimed first)
-- KEYS[3]  jobs:{q}:dead        ZSET  job ID -> died_at (ms)
-- KEYS[4]  jobs:{q}:wake        LIST  one 'r' token per job made ready, for idle workers, and
--                               per job sent to dead when the queue has a concurrency
--                               limit and jobs are ready (wake_freed: a slot freed)
-- KEYS[5]  jobs:{q}:events      STREAM the events of each call that reaped jobs: a line per job,
--                               reaped (back to ready) or dead (no attempts left, or
--                               cancelled)
-- KEYS[6]  jobs:{q}:limit       HASH  the queue's limits (read: concurrency, and ktrack for a
--                               keyed job: its key's lease is removed only while it is set)
-- KEYS[7]  jobs:{q}:outbox      HASH  read (EXISTS): resolutions for other slots waiting
--                               for a worker to deliver them (see queue/outbox.go); a
--                               reaped job that dies may add some (the lib's follow)
-- Keys     named from ARGV[1] ("jobs:{q}:", the lib's keyed jobs): for a reaped job with
--          limit key K, jobs:{q}:kready:K (RPUSH, and two LSETs to keep a paused job
--          first: behind_paused), jobs:{q}:keys (ZADD NX), jobs:{q}:kpause:K (read)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  stats prefix         "jobs:{q}:stats:" (a reaped attempt counts as failed)
-- ARGV[3]  limit                most jobs reaped in this call
-- ARGV[4]  dead_retention_ms    a dead job's hash expires after this
-- ARGV[5]  dead_max             the dead set keeps at most this many jobs
-- ARGV[6]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- Returns  {reaped, outbox}: the number of jobs reaped, and 1 when the outbox holds
--          entries (else 0), so the worker delivers them with no call of its own to ask.
-- Clock    Redis TIME.
-- Invariant a reaped job loses its lease, so its old worker can no longer ack or fail it.
--          Each reaped attempt is recorded in the job's history (outcome reaped). The first
--          write is the ZREM from active, so reaping works on a full Redis.

local active, ready, dead, wakes, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local prefix, stats, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local retention, dead_max, maxlen = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local ev = event_buf(events, maxlen)
local now = now_ms()
local expired = redis.call('ZRANGEBYSCORE', active, '-inf', now, 'LIMIT', 0, limit)
local n_ready, track = 0, {limit = KEYS[6]}
for _, id in ipairs(expired) do
  redis.call('ZREM', active, id)
  local key = prefix .. id
  local job = redis.call('HMGET', key, 'attempt', 'max_retry', 'worker', 'cancel', 'type', 'started_at',
    'attempts', 'limit_key')
  if job[8] then key_freed(prefix, job[8], {id}, now, wakes, track) end
  if job[1] then
    local err = 'lease expired: worker ' .. (job[3] or '?') .. ' stopped renewing it (crashed or cut off)'
    redis.call('HSET', key, 'last_error', err,
      'attempts', add_attempt(job[7], job[1], job[6], now, job[3], 'reaped', err))
    if tonumber(job[1]) <= max_retry(job[2]) and not job[4] then
      redis.call('HSET', key, 'state', 'ready', 'finished_at', now)
      redis.call('HDEL', key, 'lease')
      push_ready(ready, prefix, id, job[8], true, now)
      if job[8] then behind_paused(prefix, job[8], id) end
      n_ready = n_ready + 1
      event(ev, 'reaped', id, job[5], job[1], job[3], err)
    else
      to_dead(dead, prefix, id, now, retention, dead_max, nil, ev)
      event(ev, 'dead', id, job[5], job[1], job[3], err)
    end
  end
end
wake(wakes, n_ready, 'r')
wake_freed(KEYS[6], active, ready, wakes, #expired - n_ready, 0, now)
write_events(ev)
count(stats, 'processed', now, #expired)
count(stats, 'failed', now, #expired)
return {#expired, redis.call('EXISTS', KEYS[7])}
