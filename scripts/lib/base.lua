-- scripts/lib (this file, keys.lua, workflow.lua, claim.lua, joined in that order: the
-- lib): prepended to every script by scripts.go, so a transition's file holds only its
-- own logic. Nothing here touches a key by itself. Keep to `local function` definitions,
-- each with its comment right above it: a script gets only the ones it calls (Redis runs
-- a script's whole text on every call, unused functions included). A few are cold
-- (scripts.go): a script that calls one gets it, and what only it needs, defined on its
-- first call.
--
-- The clock is Redis's (TIME), never a client's: leases, due times and reaping are judged
-- by one clock however skewed the workers' clocks are.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- now_us reads TIME once and returns it in microseconds, then the same instant in ms (as
-- now_ms would). Both are exact: microseconds since the epoch stay far below 2^53.
local function now_us()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000000 + us, s * 1000 + math.floor(us / 1000)
end

-- release_unique deletes the unique key a finished job holds (its hash's unique_key field),
-- unless the job asked to keep it until its TTL, or the key now belongs to another job.
local function release_held(ukey, keep, id)
  if ukey and not keep and redis.call('GET', ukey) == id then
    redis.call('DEL', ukey)
  end
end

local function release_unique(key, id)
  local u = redis.call('HMGET', key, 'unique_key', 'unique_keep')
  release_held(u[1], u[2], id)
end

-- trim keeps a finished set (done or dead, scored by finish time) to entries younger than
-- retention_ms (dropping at most 100 old ones per call) and at most max_n of them,
-- deleting the hashes of the jobs it drops -- only while they are still in that state: a
-- stale entry whose hash expired may name a new job enqueued since under the same ID. A
-- dead job's pending set (jobs:{q}:deps:<id>, kept while it is dead) goes with its hash.
-- Returns the dropped dead jobs that retried dependents wait on (their dependents set,
-- jobs:{q}:dependents:<id>, exists: link.lua's retry mode) as follow's work, {id, 'dead',
-- '1'} each, or nil: the caller resolves them as dead, so nothing waits on a job gone.
local function trim(set, job_prefix, now, retention_ms, max_n, state)
  local old = redis.call('ZRANGEBYSCORE', set, '-inf', now - retention_ms, 'LIMIT', 0, 100)
  local over = redis.call('ZCARD', set) - max_n
  if over > 0 then
    for _, v in ipairs(redis.call('ZRANGE', set, 0, over - 1)) do table.insert(old, v) end
  end
  local linked = nil
  for _, v in ipairs(old) do
    redis.call('ZREM', set, v)
    if state ~= 'dead' then
      -- The done set: trimmed on the acks' path, where one field is all it needs.
      if redis.call('HGET', job_prefix .. v, 'state') == state then redis.call('DEL', job_prefix .. v) end
    else
      local h = redis.call('HMGET', job_prefix .. v, 'state', 'dependents')
      local base = string.sub(job_prefix, 1, -5)
      if h[1] == state then
        redis.call('DEL', job_prefix .. v, base .. 'deps:' .. v)
        if h[2] and redis.call('EXISTS', base .. 'dependents:' .. v) == 1 then
          linked = linked or {}
          linked[#linked + 1] = {v, 'dead', '1'}
        end
      end
    end
  end
  return linked
end

-- Lease tokens are what claim hands out: base36 with '.' and ':', never a '!'. When the
-- holder ends its attempt, the job's lease becomes outcome .. '!' .. token (outcome: done,
-- retry, dead, back, or cancelled: an ack or hand back found the job cancelled and sent it
-- to dead). That matches no token, so fencing is unchanged, yet the same call
-- resent after its reply was lost (go-redis sends it again) finds its own outcome there
-- and reports it again instead of "lease lost" for a job it did settle.
-- holds: token is the job's current lease (a token with a '!' is never one).
local function holds(lease, token)
  return token ~= '' and lease == token and not string.find(token, '!', 1, true)
end

local function ended_lease(outcome, token)
  return outcome .. '!' .. token
end

-- ended_outcome: the outcome with which token ended this lease, or nil.
local function ended_outcome(lease, token)
  if not lease or token == '' or string.find(token, '!', 1, true) then return nil end
  local i = string.find(lease, '!', 1, true)
  if i and string.sub(lease, i + 1) == token then return string.sub(lease, 1, i - 1) end
  return nil
end

-- event_buf starts the buffer of one call's events for the queue's stream ev (jobs:{q}:events),
-- capped at about maxlen entries (<= 0: events off, nothing is collected or written).
-- A call collects its events with event and writes them with write_events as stream entries
-- of up to b.per_entry (16) events each: one field, event, holding one line per event,
-- separated by newlines. Entries of many events rather than one per job: an XADD costs
-- Redis about 1.2us whatever it holds, and a worker's ack and claim of 100 jobs each wrote
-- 200 of them (0.88x the jobs per second of the same call without events). At most 16 per
-- entry because Redis caps a stream by entries: the cap of N entries then keeps between N
-- and 16N events, never the ~240N that one entry per busy worker's call would keep (about
-- 140 MB a queue at N = 10,000). See DESIGN.md, Events.
local function event_buf(ev, maxlen)
  return {key = ev, maxlen = maxlen, n = 0, per_entry = 16}
end

-- event adds one event to the call's buffer b (see event_buf): name, id, type, attempt, worker
-- and err separated by tabs. IDs and types cannot hold a tab or a newline (the client
-- refuses control characters), worker IDs neither (the client replaces them); the error,
-- one line of text, comes last as the one value that may hold a tab, and a newline in it
-- becomes a space, so a line is always one event. An event that repeats the one before
-- it in the same entry for another job (a batch enqueue's, a claim's of one type) is its
-- job's ID alone, a line without a tab: about 27 bytes instead of 46, the ring of events
-- of a busy queue is that much smaller, and no concatenation is made for it. Values are
-- compared as Lua values (interned strings: one comparison each).
local function event(b, name, id, typ, attempt, worker, err)
  if b.maxlen <= 0 then return end
  err = err or ''
  if err ~= '' and string.find(err, '\n', 1, true) then err = (string.gsub(err, '\n', ' ')) end
  typ, attempt, worker = typ or '', attempt or 0, worker or ''
  local n = b.n
  b.n = n + 1
  if n % b.per_entry ~= 0 and id ~= '' and name == b.name and typ == b.typ and attempt == b.attempt and
    worker == b.worker and err == b.err then
    b[n + 1] = id
    return
  end
  b.name, b.typ, b.attempt, b.worker, b.err = name, typ, attempt, worker, err
  b[n + 1] = name .. '\t' .. id .. '\t' .. typ .. '\t' .. attempt .. '\t' .. worker .. '\t' .. err
end

-- write_events appends the call's events (buffer b) to the stream as entries of up to
-- b.per_entry events (one entry for most calls), and caps the stream at about maxlen
-- entries (MAXLEN ~: Redis drops whole nodes of old entries, never one at a time) on the
-- last XADD, one command fewer per call than an XTRIM of its own. Nothing when the call
-- had no event. The entry's ID is Redis's clock, so entries are in commit order per
-- queue, and a call's events are in its order within it.
-- Call it only after the script's first write: XADD is a deny-oom command, which Redis at
-- maxmemory (noeviction) refuses only as a script's first change, so events written after
-- a removal can never make an ack, fail or reap fail on a full Redis. checked: each XADD
-- goes through redis.pcall and the first error reply is returned (only the first can
-- fail: the key's type), for a caller that undoes its writes (enqueue.lua); else an error
-- ends the script.
local function write_events(b, checked)
  if b.n == 0 then return nil end
  local call = redis.call
  if checked then call = redis.pcall end
  for i = 1, b.n, b.per_entry do
    local lines = table.concat(b, '\n', i, math.min(i + b.per_entry - 1, b.n))
    local e
    if i + b.per_entry > b.n then
      e = call('XADD', b.key, 'MAXLEN', '~', b.maxlen, '*', 'event', lines)
    else
      e = call('XADD', b.key, '*', 'event', lines)
    end
    if type(e) == 'table' and e.err then return e end
  end
  return nil
end

-- max_retry is a job's max_retry field as a number: absent, as enqueue.lua leaves it for a
-- job with the default, it is that default (queue.DefaultMaxRetry).
local function max_retry(v)
  return tonumber(v) or 10
end

-- add_attempt returns a job's attempt history (its hash's attempts field: a JSON array,
-- oldest first) with one more attempt that ended without success, keeping the last 10.
-- hist is the field's current value (nil when absent); started is the attempt's
-- started_at (ms), finished now (ms); outcome is what the attempt led to (retry, dead,
-- reaped, cancelled). An attempt that succeeded is never written: it is the job's last,
-- and its started_at, finished_at and worker say it already (readers add it), so the
-- hot path (an ack) writes no history at all.
local function add_attempt(hist, attempt, started, finished, worker, outcome, err)
  local list = {}
  if hist then
    local ok, v = pcall(cjson.decode, hist)
    if ok and type(v) == 'table' then list = v end
  end
  list[#list + 1] = {attempt = tonumber(attempt) or 0, started_at = tonumber(started) or 0,
    finished_at = finished, worker = worker or '', outcome = outcome, error = err or ''}
  while #list > 10 do table.remove(list, 1) end
  return cjson.encode(list)
end

-- ymd is the UTC date of a time in ms, "2026-12-02" (days-to-civil, H. Hinnant).
local function ymd(ms)
  local z = math.floor(ms / 86400000) + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp + 3
  if mp >= 10 then m = mp - 9 end
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02d', y, m, d)
end

-- count adds n to today's counter of outcome ("processed" or "failed") under
-- stats_prefix ("jobs:{q}:stats:"); counters are kept 90 days: they are also the daily
-- level of the metrics history (proto.StatsRetention), exact because the transition
-- itself writes them.
local function count(stats_prefix, outcome, now, n)
  if n <= 0 then return end
  local key = stats_prefix .. outcome .. ':' .. ymd(now)
  -- Only the INCRBY that created the key (its result is n) sets the expiry: one command
  -- per call instead of two.
  if redis.call('INCRBY', key, n) == n then redis.call('PEXPIRE', key, 90 * 86400000) end
end

-- wake pushes up to n tokens (at most 64) on the wake list that idle workers block on, and
-- trims the list so tokens nobody waited for cannot pile up while workers are busy.
-- token says what woke them: 'r' a job is ready (claim), 's' a job was scheduled or set
-- to retry (promote first, then plan the wait until it is due).
local function wake(key, n, token)
  if n <= 0 then return end
  if n > 64 then n = 64 end
  local t = {}
  for i = 1, n do t[i] = token end
  -- LPUSH returns the new length: trim only when tokens piled up (busy workers).
  if redis.call('LPUSH', key, unpack(t)) > 128 then redis.call('LTRIM', key, 0, 127) end
end
