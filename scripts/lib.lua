-- lib.lua: prepended to every script by scripts.go, so a transition's file holds only its
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
-- stale entry whose hash expired may name a new job enqueued since under the same ID.
local function trim(set, job_prefix, now, retention_ms, max_n, state)
  local old = redis.call('ZRANGEBYSCORE', set, '-inf', now - retention_ms, 'LIMIT', 0, 100)
  local over = redis.call('ZCARD', set) - max_n
  if over > 0 then
    for _, v in ipairs(redis.call('ZRANGE', set, 0, over - 1)) do table.insert(old, v) end
  end
  for _, v in ipairs(old) do
    redis.call('ZREM', set, v)
    if redis.call('HGET', job_prefix .. v, 'state') == state then redis.call('DEL', job_prefix .. v) end
  end
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

-- Keyed jobs. A job enqueued with a limit key K (its hash's limit_key field) never waits in
-- ready: it waits in its key's own list, and the key in the queue's ring of keys, so that
-- a key held back by its limits holds back no other key and no unkeyed job (no
-- head-of-line blocking). All in the queue's slot; base is "jobs:{q}:":
--   base..'kready:'..K   LIST  K's ready jobs (LPUSH, claims RPOP: oldest first)
--   base..'kactive:'..K  ZSET  job ID -> lease deadline (ms): K's leases, which its
--                              concurrency counts (unexpired ones only). Kept only while
--                              the limits hash's field ktrack is '1': while some key's
--                              concurrency could bind (limit.lua); else no key has one,
--                              and a claim and an ack of a keyed job pay nothing for it
--   base..'ktat:'..K     STRING K's GCRA tat (us), expiring when it is due (no garbage)
--   base..'kpause:'..K   STRING present while a handler's pause of K lasts (handback.lua,
--                              which scores K at the pause's end; key_freed leaves it there)
--   base..'keys'         ZSET  K -> when (us) K may run next: keys with ready jobs only.
--                              Claims take the due keys oldest first, and put a served key
--                              back at now (behind the others: round-robin), a key held
--                              back by its concurrency at its earliest lease deadline (an
--                              end of one of its jobs brings it forward: key_freed) and
--                              one held back by its rate at its next token (rate_ahead()
--                              before it when the queue has no rate: pop_keyed).
-- key_base is "jobs:{q}:" from the job key prefix "jobs:{q}:job:".
local function key_base(prefix)
  return string.sub(prefix, 1, -5)
end

-- push_ready makes job id ready to run: on ready, or, for a keyed job (lkey: its limit
-- key; nil or '' for none), on its key's list with the key in the ring (its place kept
-- when it has one). head: claimed next (a job handed back or reaped), else last. now in ms.
local function push_ready(ready, prefix, id, lkey, head, now)
  local list = ready
  if lkey and lkey ~= '' then
    local base = key_base(prefix)
    list = base .. 'kready:' .. lkey
    redis.call('ZADD', base .. 'keys', 'NX', now * 1000, lkey)
  end
  if head then redis.call('RPUSH', list, id) else redis.call('LPUSH', list, id) end
end

-- unready takes waiting job id off its ready list (ready, or its key's list; the key
-- leaves the ring when that was its last job), for cancel and delete.
local function unready(ready, prefix, id, lkey)
  if not lkey or lkey == '' then
    redis.call('LREM', ready, 0, id)
    return
  end
  local base = key_base(prefix)
  local list = base .. 'kready:' .. lkey
  redis.call('LREM', list, 0, id)
  if redis.call('LLEN', list) == 0 then redis.call('ZREM', base .. 'keys', lkey) end
end

-- key_flags says whether the keys' leases are kept (ktrack) and whether some key has its
-- own limits (kown), from those fields of the limits hash (see limit.lua) and its kflags,
-- as the caller read them. Limits written before limit.lua kept those fields have no
-- kflags: they are read as both on, as every claim then worked (each keyed job's lease in
-- its key's set, every key's own limits read), until the next change of the limits sets
-- them. No hash (no limits): neither. One EXISTS, only for a hash read without kflags.
local function key_flags(limit, ktrack, kown, kflags)
  if not kflags and redis.call('EXISTS', limit) == 1 then return true, true end
  return ktrack == '1', kown == '1'
end

-- key_tracked says whether the keys' leases are kept (key_flags). track: {limit =
-- jobs:{q}:limit}, one per script call: the flags are read once, at the call's first
-- keyed job.
local function key_tracked(track)
  if track.on == nil then
    local f = redis.call('HMGET', track.limit, 'ktrack', 'kflags')
    track.on = key_flags(track.limit, f[1], nil, f[2])
  end
  return track.on
end

-- key_freed ends the leases of jobs ids (a list: one or more jobs of limit key lkey) under
-- lkey (ack, fail, hand back, reap): their slots are free at once. A key the ring holds
-- back until later (its concurrency, most likely; not a handler's pause) is brought
-- forward to now, and one worker is woken (wakes: the wake list, nil for none) to claim
-- it; if its rate still holds it back, that claim puts it back at its next token. Only
-- while the leases are kept (key_tracked(track)): else there is no lease to end, and no
-- key is held back by a concurrency (limit.lua brings them forward when the flag goes
-- off).
local function key_freed(prefix, lkey, ids, now, wakes, track)
  if not key_tracked(track) then return end
  local base = key_base(prefix)
  redis.call('ZREM', base .. 'kactive:' .. lkey, unpack(ids))
  local at = tonumber(redis.call('ZSCORE', base .. 'keys', lkey))
  -- Not a key a handler paused: it stays at the pause's end (handback.lua).
  if at and at > now * 1000 and redis.call('EXISTS', base .. 'kpause:' .. lkey) == 0 then
    redis.call('ZADD', base .. 'keys', now * 1000, lkey)
    if wakes then wake(wakes, 1, 'r') end
  end
end

-- rate_ahead is how far ahead (us) a claim may take a rate's next tokens: a job whose
-- token is due within it is claimed now and starts at its token's instant (the worker
-- holds it until then), instead of the claim coming back when the token is due. A claim
-- that reached Redis after its token was due started the job late, and GCRA counts the
-- next token from that start: at 1,000/s about a third of the rate was lost that way.
-- Claimed ahead, the starts are the tokens' instants exactly, so the rate is delivered
-- in full and the bound (at most rate + burst - 1 starts in any period) holds for them.
-- 20ms: more than a round trip and a loaded worker's timer lateness, little enough for a
-- slot to wait.
local function rate_ahead()
  return 20000
end

-- rate_start is when the m-th job (1-based) a claim took under a rate starts (us): its
-- token's instant, base + (m - burst) * tau, or now when that has passed. Now without a
-- rate. g: limit_room's reply (the queue's rate), or a key's record from pop_keyed (its
-- rate's tau, base and burst, the m-th job of the key).
local function rate_start(g, m, now_us)
  if not g.tau then return now_us end
  return math.max(g.base + (m - g.burst) * g.tau, now_us)
end

-- key_quantum is how many jobs a due key may give a claim (when it has them and its
-- limits allow) even when more keys are due than the claim has jobs to give each one:
-- a claim of n then serves about n/4 keys, not n. Each key served costs Redis about 3 us
-- (its RPOP, its new place in the ring, a look at its list): taken one job a key, that
-- made keyed jobs over 1,000 keys 0.8x the throughput of unkeyed ones, taken four at a
-- time about 0.9x (BenchmarkAckClaimKeys). Fairness is kept at the grain of four jobs:
-- every due key is served in turn, each as much, and a key with fewer jobs (the issue's
-- case: B's one job beside A's 100,000) is served in the first claim as before; with K
-- keys due, a key's turn comes within about 4K/n claims instead of K/n.
local function key_quantum()
  return 4
end

-- key_spec parses a key limit as limit.lua stores it: "concurrency rate period_ms burst",
-- 0 for none of a kind. nil for none at all.
local function key_spec(s)
  if not s then return nil end
  local c, r, p, b = string.match(s, '^(%d+) (%d+) (%d+) (%d+)$')
  if not c then return nil end
  return {conc = tonumber(c), rate = tonumber(r), period = tonumber(p), burst = math.max(tonumber(b), 1)}
end

-- pop_keyed pops up to want job IDs from the due keys (ring order), each key giving its
-- share of what is left (round-robin), at least key_quantum() of them (fewer when it has
-- fewer, or want is met), and at most what its limits allow now: its
-- concurrency counts its unexpired leases, its rate is GCRA as the queue's (limit_room),
-- its tokens due within rate_ahead() claimed ahead when the queue has no rate.
-- limit: the queue's limits HASH ('key:'..K a key's own limits, read only while g.kown);
-- g: limit_room's reply (g.kdef the default of every key, g.running when the queue has a
-- concurrency limit).
-- Appends to ids and keyof (the key's record of each); returns the per-key records that
-- key_claimed settles once the claim knows which jobs it took.
-- A key's leases are among the queue's (the same jobs, the same deadlines), so a key whose
-- concurrency is above the queue's unexpired leases plus its share here cannot be full
-- after this claim: its leases are not counted (one ZCOUNT or ZCARD of active for the
-- claim instead of a ZCOUNT per key), and a limit that never binds costs no call per key.
-- Nor does one that cannot bind (g.ktrack false: no key's concurrency is below the queue's,
-- see limit.lua): no key's leases are kept, counted or added to.
local function pop_keyed(g, limit, active, base, due, want, now, now_us, ids, keyof)
  if not g.kread then -- once a claim (it may call pop_keyed twice)
    g.ktrack, g.kown = key_flags(limit, g.ktrack, g.kown, g.kflags)
    g.kread = true
  end
  -- The keys' own limits, when some key has one (the field kown, see limit.lua).
  local specs = {}
  if g.kown then
    local fields = {}
    for i, k in ipairs(due) do fields[i] = 'key:' .. k end
    specs = redis.call('HMGET', limit, unpack(fields))
  end
  local default = key_spec(g.kdef)
  local recs, n, counts = {}, #ids, {}
  for i, k in ipairs(due) do
    local left = want - n
    if left <= 0 then break end
    local sp = default
    if specs[i] then sp = key_spec(specs[i]) or default end
    local r = {key = k, list = base .. 'kready:' .. k, m = 0, popped = 0, room = 0}
    -- Every key's leases are kept while any key's concurrency could bind: a concurrency
    -- set on this key later applies to its running jobs on the next claim.
    if g.ktrack then r.act, r.ids = base .. 'kactive:' .. k, {} end
    local room = math.max(math.ceil(left / (#due - i + 1)), math.min(key_quantum(), left))
    if sp and sp.conc > 0 and r.act then
      -- Unexpired leases of the queue: counted for its own limit, else at most ZCARD.
      g.running = g.running or redis.call('ZCARD', active)
      if sp.conc - g.running <= room then
        r.free = sp.conc - redis.call('ZCOUNT', r.act, '(' .. now, '+inf')
        room = math.min(room, math.max(r.free, 0))
      end
    end
    if sp and sp.rate > 0 then
      r.tat = base .. 'ktat:' .. k
      r.tau, r.burst = math.ceil(sp.period * 1000 / sp.rate), sp.burst
      r.base = math.max(tonumber(redis.call('GET', r.tat)) or 0, now_us)
      -- The tokens due within rate_ahead(), as the queue's (limit_room): each such job
      -- starts at its token's instant (claim_jobs). Not under a queue rate, whose token
      -- instants the claim's jobs start at: one held for its key's later token would
      -- start after its queue token's, and the queue's starts could bunch up.
      r.ahead = 0
      if not g.tau then r.ahead = rate_ahead() end
      r.tokens = math.floor((now_us + r.ahead + sp.burst * r.tau - r.base) / r.tau)
      room = math.min(room, math.max(r.tokens, 0))
    end
    r.room = room
    if room == 1 then
      -- RPOP without a count returns the ID itself: no array to build, about half the
      -- cost of a call with one (a claim over many keys takes one job of each).
      local id = redis.call('RPOP', r.list)
      if id then
        r.popped, n = 1, n + 1
        ids[n], keyof[n] = id, r
      end
    elseif room > 1 then
      -- The count as a string: Redis would format a number with a slow printf.
      counts[room] = counts[room] or string.format('%d', room)
      local got = redis.call('RPOP', r.list, counts[room])
      if got then
        r.popped = #got
        for _, id in ipairs(got) do
          n = n + 1
          ids[n], keyof[n] = id, r
        end
      end
    end
    recs[#recs + 1] = r
  end
  return recs
end

-- key_claimed settles the keys pop_keyed took from: the leases of the jobs claimed
-- (r.m of them; their IDs r.ids while the leases are kept) go into the key's lease set, its rate's tat moves on by one tau each, and the
-- key gets its next place in the ring: gone when it has no job left, else now (behind
-- the keys due before it), or later when a limit holds it back: its earliest lease
-- deadline (concurrency) or its next token (rate), whichever is later. Which keys ran
-- dry is one EXISTS of their lists, not an LLEN each: a key that gave less than it asked
-- for has; one that gave all may have, asked one by one only when the EXISTS says some
-- did.
local function key_claimed(ring, recs, deadline, now, now_us)
  -- The ring's changes go in one ZADD and one ZREM: a claim may serve a hundred keys.
  local places, gone, maybe, lists, now_s = {}, {}, {}, {}, nil
  for _, r in ipairs(recs) do
    if r.room > 0 and r.popped < r.room then
      r.dry = true
    else
      maybe[#maybe + 1] = r
      lists[#lists + 1] = r.list
    end
  end
  if #lists > 0 and redis.call('EXISTS', unpack(lists)) < #lists then
    for _, r in ipairs(maybe) do r.dry = redis.call('EXISTS', r.list) == 0 end
  end
  for _, r in ipairs(recs) do
    local m = r.m
    if m > 0 and r.act then
      local z = {}
      for _, id in ipairs(r.ids) do z[#z + 1] = deadline; z[#z + 1] = id end
      redis.call('ZADD', r.act, unpack(z))
    end
    local at = now_us
    local tat = r.tau and (r.next_tat or r.base)
    if r.tau and m > 0 then
      redis.call('SET', r.tat, string.format('%.0f', tat), 'PX', math.floor((tat - now_us) / 1000) + 1)
    end
    if r.dry then
      gone[#gone + 1] = r.key
    else
      if r.free and r.free - m <= 0 then
        local first = redis.call('ZRANGEBYSCORE', r.act, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
        if first[2] then at = math.max(at, (tonumber(first[2]) + 1) * 1000) end
      end
      if r.tau and r.tokens - m <= 0 then
        -- Due rate_ahead() before its next token, when a claim may take that token.
        at = math.max(at, tat - (r.burst - 1) * r.tau - r.ahead)
      end
      -- now_us formatted once: Redis formats a number argument with a slow printf each time.
      if at == now_us then
        now_s = now_s or string.format('%.0f', now_us)
        places[#places + 1] = now_s
      else
        places[#places + 1] = at
      end
      places[#places + 1] = r.key
    end
  end
  if #places > 0 then redis.call('ZADD', ring, unpack(places)) end
  if #gone > 0 then redis.call('ZREM', ring, unpack(gone)) end
end

-- dead_core moves a job to the dead set (it is already out of every other set), releases
-- its unique key, expires its hash after retention_ms and trims the dead set. ended: the
-- job's ended lease (ended_lease) when the holder of its lease ends the attempt here, or
-- nil (the lease is deleted). Returns the job's dependents and batch fields (see follow):
-- one HMGET serves the unique key and the workflow links, so a plain job pays nothing more.
local function dead_core(dead, job_prefix, id, now, retention_ms, dead_max, ended)
  local key = job_prefix .. id
  local u = redis.call('HMGET', key, 'unique_key', 'unique_keep', 'dependents', 'batch', 'after')
  release_held(u[1], u[2], id)
  if ended then
    redis.call('HSET', key, 'state', 'dead', 'finished_at', now, 'lease', ended)
  else
    redis.call('HSET', key, 'state', 'dead', 'finished_at', now)
    redis.call('HDEL', key, 'lease')
  end
  -- A dependent that dies waiting keeps no pending set: nothing can release it any more.
  if u[5] then redis.call('DEL', string.sub(job_prefix, 1, -5) .. 'deps:' .. id) end
  redis.call('PEXPIRE', key, retention_ms)
  redis.call('ZADD', dead, now, id)
  trim(dead, job_prefix, now, retention_ms, dead_max, 'dead')
  return u[3], u[4]
end

-- queue_of is the queue name in a key prefix of that queue ("jobs:{q}:job:" -> "q"): the
-- prefix has no brace (Config.Prefix refuses them), so the first '{' opens the tag.
local function queue_of(prefix)
  local a = string.find(prefix, '{', 1, true)
  local b = string.find(prefix, '}:', a, true)
  return string.sub(prefix, a + 1, b - 1)
end

-- make_callback enqueues a batch's callback job (ready, due now) in the batch's queue
-- (base = "jobs:{q}:"): ID <batch>.<kind>, the type and payload the batch was given
-- (payload "" = the batch's counts as JSON). Called once per kind: the caller's HSETNX of
-- the batch's fired:<kind> field is the guard.
local function make_callback(base, bkey, bid, kind, now, ev)
  local cb = redis.call('HMGET', bkey, 'cb:' .. kind .. ':type', 'cb:' .. kind .. ':payload', 'total', 'done', 'dead')
  if not cb[1] then return end
  local id = bid .. '.' .. kind
  local payload = cb[2] or ''
  if payload == '' then
    -- By hand, not cjson.encode of a table: its key order is the table's hash order.
    payload = string.format('{"batch":%s,"queue":%s,"event":"%s","total":%d,"done":%d,"dead":%d}',
      cjson.encode(bid), cjson.encode(queue_of(base)), kind, tonumber(cb[3]) or 0, tonumber(cb[4]) or 0,
      tonumber(cb[5]) or 0)
  end
  local key = base .. 'job:' .. id
  if redis.call('EXISTS', key) == 1 then return end
  -- max_retry and timeout_ms left out: the defaults (see enqueue.lua).
  redis.call('HSET', key, 'type', cb[1], 'payload', payload, 'created_at', now, 'state', 'ready', 'batch_of', bid)
  redis.call('HSET', bkey, 'fired:' .. kind, id)
  redis.call('LPUSH', base .. 'ready', id)
  wake(base .. 'wake', 1, 'r')
  if ev then event(ev, 'enqueued', id, cb[1], 0, '', '') end
end

-- batch_check ends the batch bid of queue base ("jobs:{q}:") when it is sealed (state
-- running) and no child is pending: state succeeded (no child died) or completed, kept
-- retention_ms more, and its complete callback, and its success callback when no child
-- died, enqueued, each once (HSETNX of fired:<kind> is the guard).
local function batch_check(base, bid, now, ev, retention_ms)
  local bkey = base .. 'batch:' .. bid
  if redis.call('HGET', bkey, 'state') ~= 'running' or redis.call('EXISTS', bkey .. ':pending') == 1 then return end
  local dead = tonumber(redis.call('HGET', bkey, 'dead')) or 0
  local final = 'succeeded'
  if dead > 0 then final = 'completed' end
  redis.call('HSET', bkey, 'state', final, 'finished_at', now)
  redis.call('PEXPIRE', bkey, retention_ms)
  if redis.call('HSETNX', bkey, 'fired:complete', '') == 1 then make_callback(base, bkey, bid, 'complete', now, ev) end
  if dead == 0 and redis.call('HSETNX', bkey, 'fired:success', '') == 1 then
    make_callback(base, bkey, bid, 'success', now, ev)
  end
end

-- batch_settled records in the batch bid of queue base ("jobs:{q}:") that its members
-- (children "queue\tid", one SREM for them all) ended with outcome ('done' or 'dead').
-- Exactly once per member:
-- the SREM from the batch's pending set is the guard, so a resent ack, a repeated outbox
-- delivery or a later operator retry of the child counts nothing twice (done and dead are
-- counted only beside a successful SREM, in the same script: they cannot drift). Fires the
-- death callback at the first death, and the complete and success callbacks when the last
-- pending child ends after the batch was sealed; each once (HSETNX of fired).
local function batch_settled(base, bid, members, outcome, now, ev, retention_ms)
  local bkey = base .. 'batch:' .. bid
  local removed = redis.call('SREM', bkey .. ':pending', unpack(members))
  if removed == 0 then return end
  local n = redis.call('HINCRBY', bkey, outcome, removed)
  if outcome == 'dead' and n == removed and redis.call('HSETNX', bkey, 'fired:death', '') == 1 then
    make_callback(base, bkey, bid, 'death', now, ev)
  end
  batch_check(base, bid, now, ev, retention_ms)
end

-- resolve_dep records in the waiting job tid of the queue of prefix that its dependency
-- src ("queue\tid") ended with outcome ('done' or 'dead'; a purged or unknown dependency
-- is 'dead'). The SREM of src from tid's pending set (jobs:{q}:deps:<id>) is the guard:
-- each edge resolves once however often it is delivered. The job leaves waiting when the
-- set is empty (to ready), or at once to dead when src died and its policy (dep_policy)
-- is not 'run'. Returns {tid, 'dead', dependents, batch} when it sent tid to dead (the
-- caller follows it in turn), else nil.
local function resolve_dep(prefix, tid, src, outcome, now, ev, dead_retention, dead_max)
  local base = string.sub(prefix, 1, -5)
  if redis.call('SREM', base .. 'deps:' .. tid, src) == 0 then return nil end
  local key = prefix .. tid
  local d = redis.call('HMGET', key, 'state', 'dep_policy', 'type', 'limit_key')
  if d[1] ~= 'waiting' then return nil end
  if outcome ~= 'done' and d[2] ~= 'run' then
    local err = 'dependency ' .. string.gsub(src, '\t', '/') .. ' died'
    redis.call('ZREM', base .. 'waiting', tid)
    redis.call('HSET', key, 'last_error', err)
    local dd, db = dead_core(base .. 'dead', prefix, tid, now, dead_retention, dead_max)
    if ev then event(ev, 'dead', tid, d[3], 0, '', err) end
    return {tid, 'dead', dd, db}
  end
  if redis.call('EXISTS', base .. 'deps:' .. tid) == 0 then
    redis.call('ZREM', base .. 'waiting', tid)
    redis.call('HSET', key, 'state', 'ready')
    push_ready(base .. 'ready', prefix, tid, d[4], false, now)
    wake(base .. 'wake', 1, 'r')
    if ev then event(ev, 'enqueued', tid, d[3], 0, '', '') end
  end
  return nil
end

-- follow resolves what waits on jobs that just ended (done or dead) in the queue of
-- prefix ("jobs:{q}:job:"): their dependents (the SET jobs:{q}:dependents:<id>, flagged by
-- the hash's dependents field) and their batch (the hash's batch field, "queue\tbatch").
-- work: a list of {id, outcome, dependents flag, batch field}. A target in this queue is
-- resolved here, in the same script; one in another queue (another cluster slot) gets an
-- entry in this queue's outbox (jobs:{q}:outbox, field "j\tqueue\tid\tsource" or
-- "b\tqueue\tbatch\tsource", value the outcome), which a worker delivers with
-- resolve.lua and then deletes; an 'o' wake token asks one to. Resolving a dependent:
-- the SREM of "queue\tid" from its pending set (jobs:{q}:deps:<id>) is the guard, so each
-- edge resolves once however often it is delivered; the dependent leaves waiting when the
-- set is empty (to ready), or at once to dead when a dependency died and its policy
-- (dep_policy) is not 'run'; a dependent that dies this way is followed in turn.
local function follow(prefix, work, now, ev, dead_retention, dead_max)
  local base = string.sub(prefix, 1, -5)
  local q = queue_of(prefix)
  local outbox = false
  local settle, order = {}, {}
  local i = 1
  while i <= #work do
    local w = work[i]
    i = i + 1
    local src = q .. '\t' .. w[1]
    if w[3] then
      local set = base .. 'dependents:' .. w[1]
      for _, m in ipairs(redis.call('SMEMBERS', set)) do
        local t = string.find(m, '\t', 1, true)
        local tq, tid = string.sub(m, 1, t - 1), string.sub(m, t + 1)
        if tq ~= q then
          redis.call('HSET', base .. 'outbox', 'j\t' .. m .. '\t' .. w[1], w[2])
          outbox = true
        else
          local died = resolve_dep(prefix, tid, src, w[2], now, ev, dead_retention, dead_max)
          if died then work[#work + 1] = died end
        end
      end
      redis.call('DEL', set)
    end
    if w[4] then
      local t = string.find(w[4], '\t', 1, true)
      local bq, bid = string.sub(w[4], 1, t - 1), string.sub(w[4], t + 1)
      if bq ~= q then
        redis.call('HSET', base .. 'outbox', 'b\t' .. w[4] .. '\t' .. w[1], w[2])
        outbox = true
      else
        -- Settled together after the loop: one SREM and one count per batch and outcome,
        -- not per child (a worker acks many children of one batch per call).
        local g = w[2] .. '\t' .. bid
        if not settle[g] then
          settle[g] = {bid = bid, outcome = w[2]}
          order[#order + 1] = g
        end
        local m = settle[g]
        m[#m + 1] = src
      end
    end
  end
  for _, g in ipairs(order) do
    batch_settled(base, settle[g].bid, settle[g], settle[g].outcome, now, ev, dead_retention)
  end
  if outbox then wake(base .. 'wake', 1, 'o') end
end

-- to_dead moves a job to the dead set (dead_core) and resolves what waited on it
-- (follow): its dependents and its batch learn it died. ev: the call's events buffer, for
-- the dependents it moves (nil: none written).
local function to_dead(dead, job_prefix, id, now, retention_ms, dead_max, ended, ev)
  local deps, batch = dead_core(dead, job_prefix, id, now, retention_ms, dead_max, ended)
  if deps or batch then follow(job_prefix, {{id, 'dead', deps, batch}}, now, ev, retention_ms, dead_max) end
end

-- ack_jobs settles jobs whose handler succeeded (ack.lua, ackclaim.lua): each goes from
-- active to done, or to dead if an operator cancelled it meanwhile (its hash has cancel):
-- a cancel is final whatever the handler did, as on every other path (fail, handback,
-- reap). k holds the keys and settings: active, done, dead (keys), prefix, stats (key
-- prefixes), retention (and retention_s, the same as given: a string), done_max, dead_retention, dead_max, and ev, the call's events
-- buffer (see event_buf; the caller writes it). argv[from], argv[from+1],
-- argv[from+2], ... are groups of id, lease token, result. A done job keeps its hash for
-- retention ms (<= 0: deleted at once) in the done set, trimmed to done_max; a cancelled
-- one goes through to_dead with last_error "cancelled by operator" and counts as failed.
-- Returns one integer per group: 1 done, 2 done already by this very lease (a resent ack;
-- nothing changed), 3 cancelled: dead (now or, for a resent ack, already), 0 lease lost
-- (nothing changed for that job). Its first write is a ZREM: see below. Each settled job
-- gets one event in k.ev: done, or dead for a cancelled one (whose attempt is also recorded
-- in its history; a done attempt needs no record, see add_attempt). k.freed is set to the
-- number of jobs settled (slots freed, for wake_freed). A keyed job's slot under its key
-- is freed too, one key_freed per key (k.wakes: the wake list, k.track: see key_tracked).
local function ack_jobs(k, now, argv, from)
  local prefix = k.prefix
  -- at[n]: where in argv the group of the n-th finished job starts (id, token, result).
  local out, finished, held, at = {}, {}, {}, {}
  for i = from, #argv, 3 do
    local job = redis.call('HMGET', prefix .. argv[i], 'lease', 'unique_key', 'unique_keep', 'cancel',
      'type', 'attempt', 'worker', 'dependents', 'batch', 'limit_key')
    if not holds(job[1], argv[i + 1]) then
      -- 2 or 3: this very lease settled it already (go-redis resent an ack whose reply was
      -- lost).
      local ended = ended_outcome(job[1], argv[i + 1])
      if ended == 'done' then
        out[#out + 1] = 2
      elseif ended == 'cancelled' then
        out[#out + 1] = 3
      else
        out[#out + 1] = 0
      end
    else
      finished[#finished + 1] = argv[i]
      held[#held + 1] = job
      at[#at + 1] = i
      if job[4] then out[#out + 1] = 3 else out[#out + 1] = 1 end
    end
  end
  k.freed = #finished -- slots freed, for wake_freed
  if #finished == 0 then return out end
  -- The first write must free memory, not grow it: Redis at maxmemory (noeviction) refuses a
  -- script's deny-oom command (HSET, ZADD) only while the script has changed nothing, so
  -- removing the jobs from active first lets acks through when Redis is full (they free
  -- memory), instead of leaving the jobs to expire and burn their retries.
  redis.call('ZREM', k.active, unpack(finished))
  local kept, cancelled, linked, now_s = {}, 0, nil, string.format('%d', now)
  local byk, keys = {}, {}
  for n, id in ipairs(finished) do
    local key = prefix .. id
    local token = argv[at[n] + 1]
    local job = held[n]
    -- A keyed job's lease under its key ends with the others of its key in this call
    -- (one ZREM and one look at the key's place per key, not per job).
    if job[10] and key_tracked(k.track) then
      local lk = job[10]
      if not byk[lk] then
        byk[lk] = {}
        keys[#keys + 1] = lk
      end
      table.insert(byk[lk], id)
    end
    if job[4] then
      local h = redis.call('HMGET', key, 'started_at', 'attempts')
      redis.call('HSET', key, 'last_error', 'cancelled by operator', 'attempts',
        add_attempt(h[2], job[6], h[1], now, job[7], 'cancelled', 'cancelled by operator'))
      to_dead(k.dead, prefix, id, now, k.dead_retention, k.dead_max, ended_lease('cancelled', token), k.ev)
      event(k.ev, 'dead', id, job[5], job[6], job[7], 'cancelled by operator')
      cancelled = cancelled + 1
    else
      event(k.ev, 'done', id, job[5], job[6], job[7], '')
      if held[n][2] then release_held(held[n][2], held[n][3], id) end
      -- A job something waits on (a dependent, a batch) is followed once its own state is
      -- written; a plain job pays only the two fields of the HMGET above.
      if job[8] or job[9] then
        linked = linked or {}
        linked[#linked + 1] = {id, 'done', job[8], job[9]}
      end
      if k.retention <= 0 then
        redis.call('DEL', key)
      else
        redis.call('HSET', key, 'state', 'done', 'finished_at', now_s, 'result', argv[at[n] + 2], 'lease',
          ended_lease('done', token))
        redis.call('PEXPIRE', key, k.retention_s)
        kept[#kept + 1] = now_s
        kept[#kept + 1] = id
      end
    end
  end
  for _, lk in ipairs(keys) do key_freed(prefix, lk, byk[lk], now, k.wakes, k.track) end
  if #kept > 0 then
    redis.call('ZADD', k.done, unpack(kept))
    trim(k.done, prefix, now, k.retention, k.done_max, 'done')
  end
  if linked then follow(prefix, linked, now, k.ev, k.dead_retention, k.dead_max) end
  count(k.stats, 'processed', now, #finished)
  count(k.stats, 'failed', now, cancelled)
  return out
end

-- limit_room is how many of the n jobs a claim asked for the queue's limits let it take now.
-- limit is the queue's limits HASH (jobs:{q}:limit: concurrency, rate, period_ms, burst,
-- tat; see limit.lua), active its lease ZSET; now in ms and us (the same TIME). Returns g:
-- g.n the jobs allowed; g.why 1 when the concurrency limit cut n, 2 when the rate did
-- (nil: neither); with a concurrency limit, g.running (the unexpired leases) and g.free
-- (the slots left: limit - running); and, with a rate, g.tau (us between tokens), g.burst, g.base (the GCRA's
-- theoretical arrival time, never before now); g.ktrack, g.kown and g.kflags, those fields
-- as read (pop_keyed turns the first two into whether the keys' leases are kept and
-- whether some key has its own limits: key_flags), g.kdef the keys' default limits
-- (field key). An unlimited queue costs one HMGET of a missing
-- key.
-- Concurrency counts unexpired leases (ZCOUNT of deadlines after now), never a counter: a
-- dead worker's slots come back at its lease deadline, with nothing to repair or drift.
-- Rate is GCRA (the generic cell rate algorithm): one stored time, tat; a start is allowed
-- while tat - burst*tau <= now, and each moves tat on by tau. That is a token bucket of
-- size burst refilled one token per tau, exact, with no counter to drift and no window
-- edge to double up on: at most rate + burst - 1 starts in any window of one period.
local function limit_room(limit, active, n, now, now_us)
  local l = redis.call('HMGET', limit, 'concurrency', 'rate', 'period_ms', 'burst', 'tat', 'ktrack', 'key', 'kown', 'kflags')
  -- ktrack and kown as read: pop_keyed makes them booleans (key_flags).
  local g = {n = n, conc = tonumber(l[1]) or 0, ktrack = l[6], kdef = l[7], kown = l[8], kflags = l[9]}
  if g.conc > 0 then
    g.running = redis.call('ZCOUNT', active, '(' .. now, '+inf')
    g.free = g.conc - g.running
    if g.free < g.n then g.n, g.why = math.max(g.free, 0), 1 end
  end
  local rate = tonumber(l[2])
  if rate and rate > 0 then
    g.tau = math.ceil(tonumber(l[3]) * 1000 / rate)
    g.burst = tonumber(l[4]) or 1
    g.base = math.max(tonumber(l[5]) or 0, now_us)
    -- Tokens due within rate_ahead(): reserved now, each job started at its token's
    -- instant (claim_jobs), so a worker that claims a little early loses no time.
    local tokens = math.floor((now_us + rate_ahead() + g.burst * g.tau - g.base) / g.tau)
    if tokens < g.n then g.n, g.why = math.max(tokens, 0), 2 end
  end
  return g
end

-- limit_take spends m rate tokens (g from limit_room; nothing without a rate): tat moves
-- on by m*tau. Written as an integer string: tostring would round microseconds since the
-- epoch to 14 digits.
local function limit_take(limit, g, m)
  if g.tau and m > 0 then
    redis.call('HSET', limit, 'tat', string.format('%.0f', g.base + m * g.tau))
  end
end

-- limit_reply is the limit part of a claim's reply: {concurrency, why, wait_us, free}. free
-- is, with a concurrency limit, how many slots this claim left free (m: jobs it claimed;
-- else 0). why is g.why when a limit cut the claim short and jobs are left waiting (in
-- ready or under a key; else 0: the claim got all it asked for, or the queue ran dry);
-- wait_us is then how long until the next slot or token: for the rate, exactly when the
-- next token is due (m tokens taken); for concurrency, when the earliest lease expires (a
-- freed slot also pushes a wake token, see wake_freed; this is for the slot of a worker
-- that died); for keys (why 3: every key with jobs is held back by its own limits, and
-- ready is empty), when the first of them is due in the ring (a job of a key ending
-- brings its key forward and pushes a wake token, see key_freed).
local function limit_reply(g, ready, active, ring, m, now, now_us)
  local free = math.max((g.free or 0) - m, 0)
  if g.why == 3 then
    local first = redis.call('ZRANGE', ring, 0, 0, 'WITHSCORES')
    if not first[2] then return {g.conc, 0, 0, free} end
    return {g.conc, 3, math.max(tonumber(first[2]) - now_us, 1), free}
  end
  if not g.why or (redis.call('LLEN', ready) == 0 and redis.call('EXISTS', ring) == 0) then
    return {g.conc, 0, 0, free}
  end
  if g.why == 2 then
    -- The next claim may come rate_ahead before the next token is due.
    return {g.conc, 2, math.max(g.base + m * g.tau - (g.burst - 1) * g.tau - rate_ahead() - now_us, 1), free}
  end
  local first = redis.call('ZRANGEBYSCORE', active, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local wait = 1000
  if first[2] then wait = (tonumber(first[2]) + 1) * 1000 - now_us end
  return {g.conc, 1, math.max(wait, 1), free}
end

-- claim_jobs moves up to n jobs from ready and the keys' lists to active (claim.lua,
-- ackclaim.lua), each under a lease of lease_ms whose token is token .. ':' .. k (k: the
-- job's place in the claim), as many as the queue's limits allow (limit: jobs:{q}:limit,
-- see limit_room) and, for keyed jobs, their keys' limits (pop_keyed). now is in ms
-- (started_at, the lease deadline), now_us the same instant in us (the rate's clock).
-- Keyed and unkeyed jobs share the claim: while both wait, half of it goes to the due
-- keys (one job of a claim of one: every other microsecond, by Redis's clock), the rest
-- to ready, and either takes what the other leaves. A queue without keyed jobs pays one
-- ZRANGEBYSCORE of a missing key.
-- Returns the claimed jobs, one array per job: the job's hash as a flat field/value array
-- (HGETALL, read before this claim's writes) followed by four values: its ID, its new
-- attempt, k, and its start (us: now, or under a rate its token's instant, at most
-- rate_ahead from now: the worker starts it then; started_at is the same in ms); the limit part of the reply (limit_reply); and the
-- queue's concurrency limit as read (0: none; nil when nothing was claimed for n = 0 or a
-- paused queue), for wake_freed. Nothing while the queue is
-- paused. The claim also sets state, started_at (now) and worker, which the caller knows.
-- Each claimed job gets a 'started' event in the call's events buffer ev (see event_buf;
-- the caller writes it, after the RPOPs: the first writes). The rates' tokens are taken
-- after the RPOPs too, one per job claimed (a stale ID dropped takes none).
local function claim_jobs(ready, active, paused, limit, prefix, n, lease_ms, worker, token, now, now_us, ev)
  if n <= 0 or redis.call('EXISTS', paused) == 1 then return {}, {0, 0, 0, 0} end
  local g = limit_room(limit, active, n, now, now_us)
  local base = key_base(prefix)
  local ring = base .. 'keys'
  local ids, keyof, recs = {}, {}, nil
  if g.n > 0 then
    local due = redis.call('ZRANGEBYSCORE', ring, '-inf', now_us, 'LIMIT', 0, g.n + 16)
    if #due > 0 then
      local share = g.n
      if redis.call('LLEN', ready) > 0 then
        if g.n == 1 then share = now_us % 2 else share = math.ceil(g.n / 2) end
      end
      if share > 0 then recs = pop_keyed(g, limit, active, base, due, share, now, now_us, ids, keyof) end
    end
    if #ids < g.n then
      local got = redis.call('RPOP', ready, g.n - #ids)
      if got then
        for _, id in ipairs(got) do ids[#ids + 1] = id end
      end
    end
    -- A claim of one that gave its turn to ready and found it empty takes a key's job.
    if #ids == 0 and #due > 0 and not recs then
      recs = pop_keyed(g, limit, active, base, due, g.n, now, now_us, ids, keyof)
    end
  end
  local deadline = now + lease_ms
  -- Numbers given to redis.call or joined into a string are formatted with %.14g, a
  -- slow printf of a double, each time: the values shared by the claim's jobs are
  -- formatted once, as integers, and the attempts once per value met.
  local deadline_s, now_s, attempts = string.format('%d', deadline), string.format('%d', now), {}
  local out, leased = {}, {}
  for k, id in ipairs(ids) do
    local key = prefix .. id
    -- One read, one write per job: the hash is read whole (the worker needs it) and the
    -- attempt is counted from it, instead of EXISTS + HINCRBY + HGETALL.
    local job = redis.call('HGETALL', key)
    local attempt, state, typ = 1, nil, nil
    for i = 1, #job, 2 do
      local f = job[i]
      if f == 'attempt' then
        attempt = tonumber(job[i + 1]) + 1
      elseif f == 'state' then
        state = job[i + 1]
      elseif f == 'type' then
        typ = job[i + 1]
      end
    end
    -- Only a ready job is claimed. A hash that expired or was deleted leaves nothing to run,
    -- and an entry for a job in another state is stale (a second copy of an ID in ready,
    -- say from a command resent after a lost reply): running it would run the job twice,
    -- or take a done job back to active.
    if state == 'ready' then
      local start = rate_start(g, #out + 1, now_us)
      -- A job under its key's rate starts at its key token's instant too: later than now
      -- only for a token claimed ahead, never under a queue rate (pop_keyed).
      local r = keyof[k]
      if r and r.tau then
        start = math.max(start, rate_start(r, r.m + 1, now_us))
        -- The key's GCRA counts from the job's start, not its key token's instant: under a
        -- queue rate the start is the queue token's, up to rate_ahead() later, and a key
        -- token counted from the claim let the key's next job start sooner than its rate
        -- allows after this one (20ms apart under a 25ms key rate).
        r.next_tat = math.max(r.next_tat or r.base, start) + r.tau
      end
      local started = now_s
      if start ~= now_us then started = string.format('%d', math.floor(start / 1000)) end
      local att = attempts[attempt]
      if not att then att = string.format('%d', attempt); attempts[attempt] = att end
      redis.call('HSET', key, 'attempt', att, 'state', 'active', 'started_at', started,
        'worker', worker, 'lease', string.format('%s:%d', token, k))
      event(ev, 'started', id, typ, att, worker, '')
      job[#job + 1] = id
      job[#job + 1] = attempt
      job[#job + 1] = k
      job[#job + 1] = start
      out[#out + 1] = job
      leased[#leased + 1] = deadline_s
      leased[#leased + 1] = id
      if r then
        r.m = r.m + 1
        if r.ids then r.ids[r.m] = id end
      end
    end
  end
  if #leased > 0 then redis.call('ZADD', active, unpack(leased)) end
  if recs then key_claimed(ring, recs, deadline, now, now_us) end
  limit_take(limit, g, #out)
  if #ids < g.n then
    g.why = nil -- ready and the due keys ran dry before the queue's limit was met
    -- Every key left is held back by its own limits: say until when.
    if redis.call('LLEN', ready) == 0 and redis.call('EXISTS', ring) == 1 then g.why = 3 end
  end
  return out, limit_reply(g, ready, active, ring, #out, now, now_us), g.conc
end

-- wake_freed wakes workers waiting on the queue's concurrency limit after a script freed
-- slots (ack, fail, hand back with a delay, reap to dead): one 'r' token per slot freed
-- and still free, only when the queue was full before (else no claim was refused, and no
-- worker waits on it) and jobs are ready to take the slot, so a freed slot wakes one
-- waiting worker, not a herd, and a limit that never binds pushes nothing. limit:
-- jobs:{q}:limit; freed: slots this script freed; taken: jobs it claimed after freeing
-- them (ackclaim); now in ms. Jobs wait in ready or under a key (jobs:{q}:keys, named
-- from limit's name). Nothing for a queue without a concurrency limit (one HGET, or none
-- when the caller read the limit already: conc, 0 for none; nil: read it here).
local function wake_freed(limit, active, ready, wakes, freed, taken, now, conc)
  if freed <= 0 then return end
  if conc == nil then conc = tonumber(redis.call('HGET', limit, 'concurrency')) end
  if not conc or conc <= 0 then return end
  local free = conc - redis.call('ZCOUNT', active, '(' .. now, '+inf')
  if free + taken - freed > 0 then return end
  if redis.call('LLEN', ready) == 0 and redis.call('EXISTS', string.sub(limit, 1, -6) .. 'keys') == 0 then return end
  wake(wakes, math.min(freed, free), 'r')
end

-- Hand-offs: an idle worker's pickup in one round trip. A worker about to wait on a queue
-- it found empty registers as a waiter (its claim does: waiter_claimed), and an enqueue
-- that finds ready empty claims its job for one live waiter in the same script and pushes
-- it on the waiter's hand list, which the worker's BLPOP includes (hand_off). All keys in
-- the queue's slot, named from base "jobs:{q}:": waiters (ZSET: member
-- "<lease_ms>\t<token prefix>\t<worker>", score its expiry in ms) and hand:<worker> (LIST
-- of handed jobs, each encoded by hand_entry).

-- waiter_pop takes the waiter a job due now is handed to, for a queue that is not paused
-- and has no limits and no keyed jobs waiting (those keep the claim's path: a hand-off
-- skips none of their checks), or nil. The live waiter registered last (ZPOPMAX: the one
-- whose wait ends last); when even it has expired, every registration has: the set goes.
local function waiter_pop(base, now)
  if redis.call('EXISTS', base .. 'paused', base .. 'limit', base .. 'keys') > 0 then return nil end
  local w = redis.call('ZPOPMAX', base .. 'waiters')
  if not w[1] then return nil end
  if tonumber(w[2]) < now then
    redis.call('DEL', base .. 'waiters')
    return nil
  end
  return w[1]
end

-- hand_entry encodes a claimed job (a claim reply's job array: its hash's fields and
-- values, then ID, attempt, k, start) for a hand list, after the lease token's prefix
-- and now_us (the claim reply's now): each value as "<length>:<value>", so a payload may
-- hold any byte. Numbers as integers (tostring would round microseconds to 14 digits).
local function hand_entry(token, now_us, job)
  local parts = {#token .. ':' .. token}
  local s = string.format('%d', now_us)
  parts[2] = #s .. ':' .. s
  for i, v in ipairs(job) do
    if type(v) == 'number' then v = string.format('%d', v) end
    parts[i + 2] = #v .. ':' .. v
  end
  return table.concat(parts)
end

-- hand_off claims job (just LPUSHed on base's ready, its hash written) for waiter (from
-- waiter_pop) exactly as a claim of one by that worker would (claim_jobs: the hash, the
-- lease in active, the 'started' event in ev), under the lease token "<token
-- prefix>.<now_us>:1" (no two scripts share a microsecond), and pushes it on the waiter's
-- hand list, which expires with the lease: a waiter that died never pops it, and the
-- reaper recovers the job when its lease expires.
local function hand_off(base, prefix, waiter, now, now_us, ev)
  local t1 = string.find(waiter, '\t', 1, true)
  local t2 = string.find(waiter, '\t', t1 + 1, true)
  local lease_ms = tonumber(string.sub(waiter, 1, t1 - 1))
  local token = string.sub(waiter, t1 + 1, t2 - 1) .. '.' .. string.format('%d', now_us)
  local worker = string.sub(waiter, t2 + 1)
  local out = claim_jobs(base .. 'ready', base .. 'active', base .. 'paused', base .. 'limit', prefix, 1, lease_ms,
    worker, token, now, now_us, ev)
  if not out[1] then return end
  local hand = base .. 'hand:' .. worker
  redis.call('LPUSH', hand, hand_entry(token, now_us, out[1]))
  redis.call('PEXPIRE', hand, lease_ms)
end

-- waiter_claimed ends a claim by a worker that may be a waiter (waiter: its member): its
-- hand list is drained into the claim's reply (a job handed while it was claiming anyway
-- is never stranded), and it is registered for ttl ms from now when the claim left it
-- with nothing more to take (dry: it is about to wait), else deregistered. The set
-- expires with its latest registration: workers that all died leave nothing behind.
-- Returns the hand entries, oldest first.
local function waiter_claimed(base, waiter, worker, dry, now, ttl)
  local hand = base .. 'hand:' .. worker
  local got = redis.call('LRANGE', hand, 0, -1)
  if #got > 0 then redis.call('DEL', hand) end
  if dry then
    redis.call('ZADD', base .. 'waiters', now + ttl, waiter)
    redis.call('PEXPIRE', base .. 'waiters', ttl)
  else
    redis.call('ZREM', base .. 'waiters', waiter)
  end
  local out = {}
  for i = #got, 1, -1 do out[#out + 1] = got[i] end
  return out
end
