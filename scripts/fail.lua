-- fail: active -> retry (attempts left) or dead (none left, or the handler asked to skip
-- retries), for jobs whose handler failed, panicked or timed out.
--
-- KEYS[1]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms)
-- KEYS[2]  jobs:{q}:retry       ZSET  job ID -> run_at (ms)
-- KEYS[3]  jobs:{q}:dead        ZSET  job ID -> died_at (ms)
-- KEYS[4]  jobs:{q}:wake        LIST  one 's' token, so an idle worker plans for the retry's run_at;
--                               an 'r' per slot freed when the queue has a concurrency limit
--                               and jobs are ready (wake_freed)
-- KEYS[5]  jobs:{q}:events      STREAM the events of each call that failed jobs: a line per job,
--                               retry or dead
-- KEYS[6]  jobs:{q}:limit       HASH  the queue's limits (read: concurrency, and ktrack for a
--                               keyed job: its key's lease is removed only while it is set)
-- KEYS[7]  jobs:{q}:ready       LIST  read (LLEN): are jobs waiting for the freed slots?
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  stats prefix         "jobs:{q}:stats:" (daily processed and failed counters)
-- ARGV[3]  dead_retention_ms    a dead job's hash expires after this
-- ARGV[4]  dead_max             the dead set keeps at most this many jobs (oldest go first)
-- ARGV[5]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- ARGV[6+5k .. 10+5k]           id, lease token, error text, retry_in_ms (-1: skip retries),
--                               short error (one line of at most 200 bytes, for the event and
--                               the attempt history): one group per job
-- Returns  one string per job: "retry", "dead", or "lost" (lease lost, nothing changed).
--          A fail resent after its reply was lost finds its own lease ended with its
--          outcome (ended_lease in scripts/lib) and returns it again, changing nothing.
-- Clock    Redis TIME.
-- Invariant only the holder of the current lease token can fail a job; a job retries only
--          while attempt <= max_retry and it was not cancelled, so every job ends done or
--          dead. The first write is the ZREM from active, so a fail (its event and history
--          included) goes through on a full Redis.

local active, retry, dead, wakes, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local prefix, stats = ARGV[1], ARGV[2]
local retention, dead_max, maxlen = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local ev = event_buf(events, maxlen)
local now = now_ms()
local out, retries = {}, 0
local failed, track = 0, {limit = KEYS[6]}
for i = 6, #ARGV, 5 do
  local id, err, retry_in, short = ARGV[i], ARGV[i + 2], tonumber(ARGV[i + 3]), ARGV[i + 4]
  local key = prefix .. id
  local lease = redis.call('HGET', key, 'lease')
  if not holds(lease, ARGV[i + 1]) then
    local ended = ended_outcome(lease, ARGV[i + 1])
    if ended == 'retry' or ended == 'dead' then table.insert(out, ended) else table.insert(out, 'lost') end
  else
    redis.call('ZREM', active, id)
    failed = failed + 1
    local job = redis.call('HMGET', key, 'attempt', 'max_retry', 'cancel', 'type', 'worker', 'started_at',
      'attempts', 'limit_key')
    if job[8] then key_freed(prefix, job[8], {id}, now, wakes, track) end
    local outcome = 'dead'
    if retry_in >= 0 and tonumber(job[1]) <= max_retry(job[2]) and not job[3] then outcome = 'retry' end
    redis.call('HSET', key, 'last_error', err,
      'attempts', add_attempt(job[7], job[1], job[6], now, job[5], outcome, short))
    if outcome == 'retry' then
      local run_at = now + retry_in
      redis.call('HSET', key, 'state', 'retry', 'run_at', run_at, 'finished_at', now,
        'lease', ended_lease('retry', ARGV[i + 1]))
      redis.call('ZADD', retry, run_at, id)
      retries = retries + 1
    else
      to_dead(dead, prefix, id, now, retention, dead_max, ended_lease('dead', ARGV[i + 1]), ev)
    end
    event(ev, outcome, id, job[4], job[1], job[5], short)
    table.insert(out, outcome)
  end
end
wake(wakes, math.min(retries, 1), 's')
wake_freed(KEYS[6], active, KEYS[7], wakes, failed, 0, now)
write_events(ev)
count(stats, 'processed', now, failed)
count(stats, 'failed', now, failed)
return out
