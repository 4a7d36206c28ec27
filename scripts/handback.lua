-- handback: active -> ready (at the head of the list) or -> scheduled (after a delay), for
-- jobs a worker gives back without running them to the end: it is stopping, or it
-- postpones the job (an exclusive job whose lock is held elsewhere, a type it has no
-- handler for). The attempt is not counted: the job did not fail. A job an operator cancelled goes to dead instead (a cancel is final), its attempt
-- not counted either and no failure counted (the job did not fail: it was stopped).
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[2]  jobs:{q}:ready       LIST  job IDs ready to run (RPUSH: claimed next)
-- KEYS[3]  jobs:{q}:scheduled   ZSET  job ID -> run_at (ms)
-- KEYS[4]  jobs:{q}:wake        LIST  wake tokens: 'r' per job made ready, one 's' if delayed
--                               (and an 'r' per slot freed then, when the queue has a
--                               concurrency limit and jobs are ready: wake_freed)
-- KEYS[5]  jobs:{q}:dead        ZSET  job ID -> died_at (ms), for cancelled jobs
-- KEYS[6]  jobs:{q}:events      STREAM the events of each call that changed jobs: a line per job,
--                               handed_back, postponed (a postpone,
--                               with its reason as the error), or dead (cancelled)
-- KEYS[7]  jobs:{q}:limit       HASH  the queue's limits (read: concurrency, and ktrack for a
--                               keyed job: its key's lease is removed only while it is set)
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  delay_ms             0: ready at once; > 0: scheduled that long from now
-- ARGV[3]  dead_retention_ms    a cancelled job's hash expires this long after it died
-- ARGV[4]  dead_max             the dead set keeps at most this many jobs
-- ARGV[5]  postpone             "1": a postpone (delay_ms > 0): the hash's postponed
--                               counter goes up by one; "k": the same, and a job with a
--                               limit key K pauses K for delay_ms instead: the job goes
--                               back to the head of K's list (jobs:{q}:kready:K, claimed
--                               first when K runs again), K to jobs:{q}:keys at now+delay,
--                               and jobs:{q}:kpause:K (STRING: the job's ID, PX delay_ms)
--                               keeps a job of K ending from bringing K forward
--                               (key_freed); "": a plain hand back (of a job of a key
--                               paused so, right behind the paused job: behind_paused)
-- ARGV[6]  reason               stored as last_error when not empty (postpone only)
-- ARGV[7]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- ARGV[8+2k], ARGV[9+2k]        id, lease token: one pair per job
-- Returns  one integer per job: 1 handed back, 3 cancelled by an operator so dead
--          instead, 0 lease lost (nothing changed). A hand back resent after its reply
--          was lost finds its own lease ended (ended_lease in scripts/lib) and returns the
--          same 1 or 3 again, changing nothing.
-- Clock    Redis TIME (when delay_ms > 0 or a job is cancelled).
-- Invariant only the holder of the current lease token can hand a job back; a job with
--          the cancel flag never goes back to ready or scheduled. A hand back is not an
--          attempt (it is uncounted), so it adds nothing to the job's attempt history. The
--          first write is the ZREM from active, so hand backs go through on a full Redis.

local active, ready, scheduled, wakes, dead, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix, delay = ARGV[1], tonumber(ARGV[2])
local dead_retention, dead_max = tonumber(ARGV[3]), tonumber(ARGV[4])
local postpone, reason = ARGV[5] ~= '', ARGV[6]
local pause_key = ARGV[5] == 'k'
local maxlen = tonumber(ARGV[7])
local ev = event_buf(events, maxlen)
local now = nil


local out, n, freed, track = {}, 0, 0, {limit = KEYS[7]}
for i = 8, #ARGV, 2 do
  local id = ARGV[i]
  local key = prefix .. id
  local job = redis.call('HMGET', key, 'lease', 'cancel', 'type', 'attempt', 'worker', 'limit_key')
  if not holds(job[1], ARGV[i + 1]) then
    local ended = ended_outcome(job[1], ARGV[i + 1])
    if ended == 'back' then
      table.insert(out, 1)
    elseif ended == 'cancelled' then
      table.insert(out, 3)
    else
      table.insert(out, 0)
    end
  else
    redis.call('ZREM', active, id)
    freed = freed + 1
    if job[6] then
      now = now or now_ms()
      key_freed(prefix, job[6], {id}, now, wakes, track)
    end
    redis.call('HINCRBY', key, 'attempt', -1)
    if job[2] or delay > 0 then now = now or now_ms() end
    if job[2] then
      redis.call('HSET', key, 'last_error', 'cancelled by operator')
      to_dead(dead, prefix, id, now, dead_retention, dead_max, ended_lease('cancelled', ARGV[i + 1]), ev)
      event(ev, 'dead', id, job[3], job[4], job[5], 'cancelled by operator')
      table.insert(out, 3)
    else
      local ended = ended_lease('back', ARGV[i + 1])
      if postpone then
        redis.call('HINCRBY', key, 'postponed', 1)
        if reason ~= '' then redis.call('HSET', key, 'last_error', reason) end
      end
      if pause_key and job[6] and delay > 0 then
        local base = key_base(prefix)
        redis.call('HSET', key, 'state', 'ready', 'lease', ended)
        push_ready(ready, prefix, id, job[6], true, now)
        redis.call('SET', base .. 'kpause:' .. job[6], id, 'PX', delay)
        redis.call('ZADD', base .. 'keys', (now + delay) * 1000, job[6])
      elseif delay > 0 then
        local run_at = now + delay
        redis.call('HSET', key, 'state', 'scheduled', 'run_at', run_at, 'lease', ended)
        redis.call('ZADD', scheduled, run_at, id)
      else
        redis.call('HSET', key, 'state', 'ready', 'lease', ended)
        push_ready(ready, prefix, id, job[6], true, now or now_ms())
        if job[6] then behind_paused(prefix, job[6], id) end
      end
      -- The attempt in the event is the one given back (the hash's is one less now).
      if postpone then
        event(ev, 'postponed', id, job[3], job[4], job[5], reason)
      else
        event(ev, 'handed_back', id, job[3], job[4], job[5], '')
      end
      n = n + 1
      table.insert(out, 1)
    end
  end
end
-- Jobs made ready bring their own 'r' tokens; the other slots freed wake a waiting worker.
if delay > 0 then
  wake(wakes, math.min(n, 1), 's')
  wake_freed(KEYS[7], active, ready, wakes, freed, 0, now)
else
  wake(wakes, n, 'r')
  if freed > n then wake_freed(KEYS[7], active, ready, wakes, freed - n, 0, now or now_ms()) end
end
write_events(ev)
return out
