-- enqueue: new jobs -> ready (due now), scheduled (due later) or waiting (for dependencies
-- to end: a workflow). Many jobs per call.
--
-- KEYS[1]  jobs:{q}:ready       LIST  job IDs ready to run (LPUSH here, workers RPOP)
-- KEYS[2]  jobs:{q}:scheduled   ZSET  job ID -> run_at (ms)
-- KEYS[3]  jobs:{q}:wake        LIST  wake tokens: 'r' per ready job, one 's' if any was scheduled
-- KEYS[4]  jobs:{q}:events      STREAM the events of each call that wrote jobs: a line per job
--                               written, enqueued (ready) or scheduled
-- Keys     named from ARGV[1] ("jobs:{q}:"), for jobs with a limit key K due now:
--          jobs:{q}:kready:K (LIST, LPUSH: instead of ready) and jobs:{q}:keys (ZSET, K
--          added at now unless there: ZADD NX), see the lib's keyed jobs; and for the
--          hand-off of a lone job (below): jobs:{q}:paused, jobs:{q}:limit, jobs:{q}:keys
--          (EXISTS), jobs:{q}:waiters (ZSET: ZRANGE, then ZREM, or DEL when all expired), then as
--          claim.lua's claim of one would: jobs:{q}:active (ZADD), the job's hash, and the
--          waiter's hand list jobs:{q}:hand:<worker> (LIST: LPUSH, PEXPIRE lease)
-- ARGV[1]  job key prefix       "jobs:{q}:job:" (same hash tag as KEYS)
-- ARGV[2]  call nonce           unique per call ("" when every ID is fresh), kept in the
--                               hash of a job with a caller-chosen ID ('enq'), so that this
--                               very call, resent, knows its own job from another's
-- ARGV[3]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- ARGV[4..] groups of jobs sharing their settings (a batch is usually one group, so a job
--          costs two arguments), each a 15-value header followed by its jobs:
--          n (jobs in the group), type, max_retry ("" = the default, 10: the field is left
--          out, see KEYS.md), timeout_ms ("" = the default, 30 min: left out too),
--          delay_ms (>= 0, from Redis's clock), at_ms (absolute ms; 0 = use delay_ms),
--          exclusive ("" = not exclusive; else the lock name workers run it under),
--          unique_ttl_ms (0 = not unique), unique_keep ("1": keep the unique key until its
--          TTL, not just until the job finishes), fresh ("1": the client generated the IDs,
--          48-bit time + 80 random bits, and a job whose ID's time is at most 1 s before
--          Redis's clock gets no created_at: the ID's time is it; "": the caller chose
--          them), meta ("" = none;
--          else key\tvalue\tkey\tvalue..., each pair stored as the hash field "m:" .. key),
--          after ("" = none; else policy\tqueue\tid\tqueue\tid...: the jobs wait in
--          state waiting, in jobs:{q}:waiting, with those dependencies in their pending SET
--          jobs:{q}:deps:<id>; policy "run" runs them even when a dependency dies, "die"
--          sends them to dead; the client then links each dependency, see link.lua),
--          batch ("" = none; else queue\tbatch: the jobs are children of that batch, whose
--          pending set already holds them, see batch.lua), dependents ("" = none; else
--          queue\tid\tqueue\tid...: jobs of the same client call that wait on these, so
--          registered at once in the jobs' SET jobs:{q}:dependents:<id>: a job cannot end
--          before its dependents of the same call are linked, whatever its retention),
--          limit_key ("" = none; else the jobs wait under that key when ready, see below;
--          "\t", which no key holds: each job gives its own, so that keyed jobs of
--          different keys share a group);
--          then per job: id, payload (stored in 64-byte pieces up to 4 KiB, see below),
--          in a unique group its unique key jobs:{q}:unique:<k>, and in a group whose
--          limit_key is "\t" its limit key.
--          Or, for one job due now with a generated ID and no option but max_retry and
--          timeout_ms (the one-job path; most Enqueue calls), exactly 8 values: ARGV[4]
--          type, ARGV[5] max_retry, ARGV[6] timeout_ms (each "" at its default, as in a
--          group), ARGV[7] id, ARGV[8] payload. A group call always has 20 or more.
-- Returns  {codes, holder, holder, ...}: codes has one character per job, in order:
--          '1' enqueued; '0' duplicate ID (a job with that caller-chosen ID exists in this
--          queue); 'u' a unique job whose key is held, by the job whose ID is the next
--          holder. A fresh ID whose hash exists can only be this very call sent again (go-redis
--          resends a command whose reply was lost): it is reported '1', already enqueued;
--          so is a caller-chosen ID whose hash holds this call's nonce.
--          The one-job path (the 8-value ARGV) replies 1, the integer, for its job's '1': an
--          array costs Redis several times more to reply than the commands' own work on that
--          path, and its one job cannot be a duplicate (its ID is generated) or unique.
--          Nothing is written for a job that is not new. An error reply (WRONGTYPE when a list
--          or set of the queue holds another type, OOM), writing nothing at all.
-- Hand-off a one-job call (the short ARGV) that finds ready empty, on a queue not
--          paused, without limits and without keyed jobs: when a worker waits on the queue
--          (registered by its claim, see ackclaim.lua), the job is claimed for it here,
--          exactly as its own claim of one would (attempt 1, state active, started_at,
--          worker, lease "<token prefix>.<now_us>:1", its deadline in active, the 'started'
--          event after the 'enqueued' one, both in one entry), its hash written once, as
--          claimed, and it is pushed on the worker's hand list (hand_entry in the lib),
--          which its BLPOP includes, instead of a wake token: the pickup takes the
--          enqueue's round trip and the BLPOP's reply, not a claim's round trip more. A
--          busy queue (ready not empty) pays nothing for it.
-- Clock    Redis's: TIME, or, on the busy path (below), the time (ms) of the events entry
--          its XADD adds (Redis's clock, or the stream's last entry's time if that is
--          later); at_ms is taken as given, and a generated ID's time stands for created_at
--          when it is at most 1 s before Redis's clock (the client's clock).
-- Invariant a job hash and exactly one of ready/scheduled/waiting are written together, or nothing
--          (a waiting job's pending set with it; a handed job: active and the hand list);
--          an existing job hash is never overwritten; a unique key is taken in the same
--          step, so of concurrent enqueues one wins; each job written has its event, and
--          a refused call writes no event either.

-- id_ms is the time (ms) a generated ID starts with: its first 10 characters, Crockford
-- base32 (ULID), or nil when they are not that. By arithmetic on the bytes, all ten read
-- by one string.byte call (a call per byte cost the busy path more than its HSET): a
-- table of the alphabet would be made on every call.
local function b32(c)
  if c >= 48 and c <= 57 then return c - 48 end
  if c < 65 or c > 90 or c == 73 or c == 76 or c == 79 or c == 85 then return nil end
  -- A is 10; I, L, O and U are not in the alphabet.
  if c > 85 then return c - 59 elseif c > 79 then return c - 58 elseif c > 76 then return c - 57
  elseif c > 73 then return c - 56 end
  return c - 55
end
local function id_ms(id)
  if #id ~= 26 then return nil end
  local c1, c2, c3, c4, c5, c6, c7, c8, c9, c10 = string.byte(id, 1, 10)
  local v1, v2, v3, v4, v5 = b32(c1), b32(c2), b32(c3), b32(c4), b32(c5)
  local v6, v7, v8, v9, v10 = b32(c6), b32(c7), b32(c8), b32(c9), b32(c10)
  if not (v1 and v2 and v3 and v4 and v5 and v6 and v7 and v8 and v9 and v10) then return nil end
  return ((((((((v1 * 32 + v2) * 32 + v3) * 32 + v4) * 32 + v5) * 32 + v6) * 32 + v7) * 32 + v8) * 32 + v9) * 32 + v10
end

-- The busy path: the one-job path (the 8-value ARGV) with max_retry and timeout_ms at
-- their defaults and a payload of at most two pieces (128 bytes), on a queue where no
-- hand-off can happen (ready not empty, or the queue paused, limited or keyed): most
-- Enqueue calls under load. It runs first, before the functions the other paths need are
-- created (Redis runs a script's whole text on every call: each local function is a
-- closure made anew), reads no TIME (its XADD's entry ID gives Redis's clock) and makes
-- no table: the same writes as the one-job path below, in the same order. Whatever it
-- does not take goes on with its EXISTS answer (busy_n).
local busy_n
if #ARGV == 8 and ARGV[5] == '' and ARGV[6] == '' and #ARGV[8] <= 128 then
  local ready, prefix, id = KEYS[1], ARGV[1], ARGV[7]
  local key = prefix .. id
  local base = string.sub(prefix, 1, -5)
  -- The one-job path's EXISTS (see there): 5 or more, this call resent; 1 to 4, busy.
  busy_n = redis.call('EXISTS', key, key, key, key, key, ready, base .. 'paused', base .. 'limit', base .. 'keys')
  if busy_n >= 5 then return 1 end
  if busy_n > 0 then
    -- Arguments go to redis.call as the strings they came in: a Lua number is formatted
    -- anew by every call (snprintf %.17g, more instructions than the LPUSH it goes with).
    local wakes, events, maxlen, typ, payload = KEYS[3], KEYS[4], ARGV[3], ARGV[4], ARGV[8]
    local r = redis.pcall('LPUSH', ready, id)
    if type(r) == 'table' then return r end
    r = redis.pcall('LPUSH', wakes, 'r')
    if type(r) == 'table' then
      redis.call('LTRIM', ready, 1, -1)
      return r
    end
    local now
    if tonumber(maxlen) > 0 then
      local e = redis.pcall('XADD', events, 'MAXLEN', '~', maxlen, '*', 'event', 'enqueued\t' .. id .. '\t' .. typ .. '\t0\t\t')
      if type(e) == 'table' then
        redis.call('LTRIM', ready, 1, -1)
        redis.call('LTRIM', wakes, 1, -1)
        return e
      end
      now = tonumber(string.sub(e, 1, string.find(e, '-', 1, true) - 1))
    else
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    if r > 192 then redis.call('LTRIM', wakes, '0', '127') end
    local t = id_ms(id)
    local size = #payload
    if t and t <= now and t >= now - 1000 then -- created_at is the ID's time
      if size <= 64 then
        redis.call('HSET', key, 'type', typ, 'state', 'ready', 'payload', payload)
      else
        redis.call('HSET', key, 'type', typ, 'state', 'ready', 'payload', string.sub(payload, 1, 64),
          'payload+1', string.sub(payload, 65))
      end
    elseif size <= 64 then
      redis.call('HSET', key, 'type', typ, 'state', 'ready', 'created_at', now, 'payload', payload)
    else
      redis.call('HSET', key, 'type', typ, 'state', 'ready', 'created_at', now, 'payload', string.sub(payload, 1, 64),
        'payload+1', string.sub(payload, 65))
    end
    return 1
  end
end

-- (the lib's functions go here)

local ready, scheduled, wakes, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, nonce, maxlen = ARGV[1], ARGV[2], tonumber(ARGV[3])
local maxlen_s = ARGV[3] -- for XADD as given (see the busy path)
local now_u, now = now_us()
local nargs = #ARGV

-- needs_created: a job needs its created_at field unless its ID was generated (fresh)
-- with a time at most 1 s before now: then that time is the job's creation, as the
-- client's clock saw it, and readers take it from the ID (a 10-byte listpack integer
-- and its 12-byte name less per job). Later than now (a client's clock ahead of Redis's)
-- or older: the field, Redis's time.
local function needs_created(id, fresh)
  if not fresh then return true end
  local t = id_ms(id)
  return not t or t > now or t < now - 1000
end

-- refs splits 'queue\tid\tqueue\tid...' into its 'queue\tid' members (an after list's
-- dependencies, a call's dependents).
local function refs(s)
  local out = {}
  local at = 1
  while at <= #s do
    local t1 = string.find(s, '\t', at, true)
    local t2 = string.find(s, '\t', t1 + 1, true) or (#s + 1)
    out[#out + 1] = string.sub(s, at, t2 - 1)
    at = t2 + 1
  end
  return out
end

-- add_payload puts a job's payload in f after its m-th value and returns the new count:
-- one field when it is at most 64 bytes or over 4 KiB, else 64-byte pieces payload,
-- payload+1, ... (see the job hashes below). names caches the names 'payload+' .. p.
local function add_payload(f, m, payload, names)
  local size = #payload
  if size <= 64 or size > 4096 then
    f[m + 1] = 'payload'; f[m + 2] = payload
    return m + 2
  end
  f[m + 1] = 'payload'; f[m + 2] = string.sub(payload, 1, 64)
  m = m + 2
  for p = 1, math.ceil(size / 64) - 1 do
    local name = names[p]
    if not name then name = 'payload+' .. p; names[p] = name end
    f[m + 1] = name; f[m + 2] = string.sub(payload, p * 64 + 1, p * 64 + 64)
    m = m + 2
  end
  return m
end

-- The one-job path: one job due now, with a generated ID and no option but max_retry and
-- timeout_ms (most Enqueue calls), in its own short ARGV (see the header): the same writes
-- in the same order as the general path below, without its tables and loops, which cost
-- Redis more than the commands did; and, when a worker waits on the queue, the hand-off.
if nargs == 8 then
  local typ, id = ARGV[4], ARGV[7]
  local key = prefix .. id
  local base = string.sub(prefix, 1, -5)
  -- One EXISTS answers both questions the path starts with (a redis.call costs an idle
  -- Redis about 10 us: one call, not two): the job's key, counted five times, exists (a
  -- fresh ID that exists is this very call, resent: already enqueued), and whether a
  -- hand-off is ruled out (at most 4): ready is not empty (a busy queue pays nothing
  -- for hand-offs), the queue is paused, has limits or keyed jobs (they keep the claim's
  -- checks).
  local n = busy_n or redis.call('EXISTS', key, key, key, key, key, ready, base .. 'paused', base .. 'limit', base .. 'keys')
  if n >= 5 then return 1 end
  local waiter, lapsed = nil, false
  if n == 0 then
    -- The live waiter registered last (ZRANGE's last: the one whose wait ends last),
    -- read, not popped: the call's first write must be one that Redis at maxmemory
    -- refuses (it refuses only a script's first), so the waiter is taken out after it.
    -- When even the last has expired, every registration has: the set goes.
    local w = redis.call('ZRANGE', base .. 'waiters', '-1', '-1', 'WITHSCORES')
    if w[1] then
      if tonumber(w[2]) < now then lapsed = true else waiter = w[1] end
    end
  end
  local payload = ARGV[8]
  local size = #payload
  local created = needs_created(id, true)
  if not waiter then
    local r = redis.pcall('LPUSH', ready, id)
    if type(r) == 'table' then return r end
    if lapsed then redis.call('DEL', base .. 'waiters') end
    r = redis.pcall('LPUSH', wakes, 'r')
    if type(r) == 'table' then
      redis.call('LTRIM', ready, 1, -1)
      return r
    end
    if maxlen > 0 then
      local e = redis.pcall('XADD', events, 'MAXLEN', '~', maxlen_s, '*', 'event', 'enqueued\t' .. id .. '\t' .. typ .. '\t0\t\t')
      if type(e) == 'table' then
        redis.call('LTRIM', ready, 1, -1)
        redis.call('LTRIM', wakes, 1, -1)
        return e
      end
    end
    if r > 192 then redis.call('LTRIM', wakes, '0', '127') end
    -- The defaults, a payload of at most two pieces and created_at from the ID: no table.
    if ARGV[5] == '' and ARGV[6] == '' and size <= 128 and not created then
      if size <= 64 then
        redis.call('HSET', key, 'type', typ, 'state', 'ready', 'payload', payload)
      else
        redis.call('HSET', key, 'type', typ, 'state', 'ready', 'payload', string.sub(payload, 1, 64),
          'payload+1', string.sub(payload, 65))
      end
      return 1
    end
  end
  -- The job's hash: type, max_retry and timeout_ms unless at their defaults, state,
  -- created_at unless the ID's time is it, the payload.
  local f = {'type', typ}
  local m = 2
  if ARGV[5] ~= '' then f[3] = 'max_retry'; f[4] = ARGV[5]; m = 4 end
  if ARGV[6] ~= '' then f[m + 1] = 'timeout_ms'; f[m + 2] = ARGV[6]; m = m + 2 end
  f[m + 1] = 'state'; f[m + 2] = 'ready'
  local state_at = m + 2
  m = m + 2
  if created then f[m + 1] = 'created_at'; f[m + 2] = string.format('%d', now); m = m + 2 end
  m = add_payload(f, m, payload, {})
  if not waiter then
    redis.call('HSET', key, unpack(f, 1, m))
    return 1
  end
  -- The hand-off: the job is claimed for the waiter as its claim of one would claim it
  -- (claim_jobs: attempt 1, state active, started_at, worker, the lease token
  -- "<token prefix>.<now_us>:1", its deadline in active, a 'started' event after the
  -- 'enqueued' one), its hash written once, as claimed, and it is pushed on the waiter's
  -- hand list, which expires with the lease: a waiter that died never pops it, and the
  -- reaper recovers the job when its lease expires. Nothing is read back: the hand entry
  -- (the hash as a claim would have read it, see hand_entry) is made from f.
  local t1 = string.find(waiter, '\t', 1, true)
  local t2 = string.find(waiter, '\t', t1 + 1, true)
  local lease_ms = string.sub(waiter, 1, t1 - 1)
  local worker = string.sub(waiter, t2 + 1)
  local now_us_s = string.format('%d', now_u)
  local token = string.sub(waiter, t1 + 1, t2 - 1) .. '.' .. now_us_s
  -- The claim reply's job array is f's first m values then these four (no copy of f:
  -- the claim's own fields replace them below).
  f[m + 1] = id; f[m + 2] = '1'; f[m + 3] = '1'; f[m + 4] = now_us_s
  local hand = base .. 'hand:' .. worker
  -- The first write: refused on a full Redis, or a key of the wrong type, with nothing
  -- written.
  local r = redis.pcall('LPUSH', hand, hand_entry(token, now_us_s, f, m + 4))
  if type(r) == 'table' then return r end
  if maxlen > 0 then
    local e = redis.pcall('XADD', events, 'MAXLEN', '~', maxlen_s, '*', 'event', 'enqueued\t' .. id .. '\t' .. typ ..
      '\t0\t\t\nstarted\t' .. id .. '\t' .. typ .. '\t1\t' .. worker .. '\t')
    if type(e) == 'table' then
      redis.call('LTRIM', hand, 1, -1)
      return e
    end
  end
  redis.call('ZREM', base .. 'waiters', waiter)
  redis.call('PEXPIRE', hand, lease_ms)
  f[state_at] = 'active'
  f[m + 1] = 'attempt'; f[m + 2] = '1'
  f[m + 3] = 'started_at'; f[m + 4] = string.format('%d', now)
  f[m + 5] = 'worker'; f[m + 6] = worker
  f[m + 7] = 'lease'; f[m + 8] = token .. ':1'
  redis.call('HSET', key, unpack(f, 1, m + 8))
  redis.call('ZADD', base .. 'active', string.format('%d', now + tonumber(lease_ms)), id)
  return 1
end

-- Pass 1 decides every job's outcome with reads only; pass 2 writes. Scripts are not
-- rolled back on error, so everything that can fail (a wrong-typed list or set, OOM on
-- the first write) is met before any job hash is written. Tables are made only when a
-- call needs them: most calls are one job, where they are much of the cost.

-- One EXISTS over every job key of the call: in the common case no job exists, and no
-- job needs a check of its own.
local keys = {}
local n_keys = 0
-- group_step is how many values each job of the group at ARGV[i] takes: its ID and
-- payload, its unique key in a unique group, its own limit key when limit_key is "\t";
-- and where that limit key is from the ID (nil: the jobs have none of their own).
local function group_step(i)
  local step = 2
  if ARGV[i + 7] ~= '0' then step = 3 end
  if ARGV[i + 14] == '\t' then return step + 1, step end
  return step, nil
end
local i = 4
while i <= nargs do
  local step = group_step(i)
  local j = i + 15
  for _ = 1, tonumber(ARGV[i]) do
    n_keys = n_keys + 1
    keys[n_keys] = prefix .. ARGV[j]
    j = j + step
  end
  i = j
end
local some_exist = n_keys > 0 and redis.call('EXISTS', unpack(keys)) > 0

-- codes[k] for job k of the call: '1' to write, 'e' a fresh ID that exists (reported '1',
-- not written), '0' duplicate ID, 'u' unique key held.
local codes, holders, seen, taken = {}, nil, nil, nil
-- n_ready counts every job due now, n_plain those of them for ready (no limit key);
-- keyed[K] lists the ones for key K's list, key_order the keys in the order met.
local ready_ids, n_ready, n_plain, due, keyed, key_order, waiting = {}, 0, 0, nil, nil, nil, nil
local k = 0
i = 4
while i <= nargs do
  local unique, fresh = ARGV[i + 7] ~= '0', ARGV[i + 9] == '1'
  local lkey = ARGV[i + 14]
  local at = tonumber(ARGV[i + 5])
  local run_at = at
  if at == 0 then run_at = now + tonumber(ARGV[i + 4]) end
  local step, key_at = group_step(i)
  if not fresh and not seen then seen = {} end -- caller-chosen IDs met in this call
  if unique and not taken then taken = {} end -- unique keys taken in this call
  local j = i + 15
  for _ = 1, tonumber(ARGV[i]) do
    k = k + 1
    local id = ARGV[j]
    local code = '1'
    if key_at then lkey = ARGV[j + key_at] end
    if (some_exist and redis.call('EXISTS', keys[k]) == 1) or (not fresh and seen[id]) then
      -- A caller-chosen ID is this call's own job only if its hash holds our nonce.
      if fresh or (nonce ~= '' and not seen[id] and redis.call('HGET', keys[k], 'enq') == nonce) then
        code = 'e'
      else
        code = '0'
      end
    elseif unique then
      local ukey = ARGV[j + 2]
      local holder = taken[ukey] or redis.call('GET', ukey)
      if holder then
        code = 'u'
        holders = holders or {}
        holders[#holders + 1] = holder
      else
        taken[ukey] = id
      end
    end
    if code == '1' then
      if not fresh then seen[id] = true end
      if ARGV[i + 11] ~= '' then
        waiting = waiting or {}
        waiting[#waiting + 1] = now
        waiting[#waiting + 1] = id
      elseif run_at > now then
        due = due or {}
        due[#due + 1] = run_at
        due[#due + 1] = id
      elseif lkey ~= '' then
        n_ready = n_ready + 1
        keyed = keyed or {}
        if not keyed[lkey] then
          keyed[lkey] = {}
          key_order = key_order or {}
          key_order[#key_order + 1] = lkey
        end
        table.insert(keyed[lkey], id)
      else
        n_ready = n_ready + 1
        n_plain = n_plain + 1
        ready_ids[n_plain] = id
      end
    end
    codes[k] = code
    j = j + step
  end
  i = j
end

-- The lists and sets first, each write checked (pcall): a failure undoes the ones before
-- it and is returned.
if n_plain > 0 then
  local r = redis.pcall('LPUSH', ready, unpack(ready_ids))
  if type(r) == 'table' and r.err then return r end
end
-- Keyed jobs go on their key's list, the key into the ring of keys at now when it is not
-- there yet (the lib's keyed jobs; push_ready does it for one job): all the keys by one
-- ZADD NX, so a batch over many keys pays one call per key (its LPUSH), not two.
local kbase = string.sub(prefix, 1, -5)
local pushed = {} -- pushed[c]: {list, jobs pushed, key}
local ring, ringed = kbase .. 'keys', false -- ringed: the ZADD went through
local function undo_keyed()
  for _, p in ipairs(pushed) do
    redis.call('LTRIM', p[1], p[2], -1)
    -- A key whose list held only this call's jobs was put in the ring for them: out again.
    -- A key in the ring always has jobs in its list (the lib's keyed jobs), so one whose
    -- list is gone now was not there before this call.
    if ringed and redis.call('EXISTS', p[1]) == 0 then redis.call('ZREM', ring, p[3]) end
  end
end
if keyed then
  -- The ring's score (us) formatted once: a number argument is formatted by every call.
  local now_us, places = string.format('%d', now * 1000), {}
  for c, lk in ipairs(key_order) do
    local list = kbase .. 'kready:' .. lk
    local r = redis.pcall('LPUSH', list, unpack(keyed[lk]))
    if type(r) == 'table' and r.err then
      if n_plain > 0 then redis.call('LTRIM', ready, n_plain, -1) end
      undo_keyed()
      return r
    end
    pushed[c] = {list, #keyed[lk], lk}
    places[2 * c - 1], places[2 * c] = now_us, lk
  end
  local r = redis.pcall('ZADD', ring, 'NX', unpack(places))
  if type(r) == 'table' and r.err then
    if n_plain > 0 then redis.call('LTRIM', ready, n_plain, -1) end
    undo_keyed()
    return r
  end
  ringed = true
end
if due then
  local r = redis.pcall('ZADD', scheduled, unpack(due))
  if type(r) == 'table' and r.err then
    if n_plain > 0 then redis.call('LTRIM', ready, n_plain, -1) end
    undo_keyed()
    return r
  end
end
if waiting then
  local r = redis.pcall('ZADD', string.sub(prefix, 1, -5) .. 'waiting', unpack(waiting))
  if type(r) == 'table' and r.err then
    if n_plain > 0 then redis.call('LTRIM', ready, n_plain, -1) end
    undo_keyed()
    if due then
      for d = 2, #due, 2 do redis.call('ZREM', scheduled, due[d]) end
    end
    return r
  end
end
-- Wake tokens: one 'r' per ready job (at most 64), one 's' if any job was scheduled, so
-- an idle worker re-plans how long to wait.
local r
if n_ready == 1 and not due then
  r = redis.pcall('LPUSH', wakes, 'r')
elseif n_ready > 0 or due then
  local tokens = {}
  for t = 1, math.min(n_ready, 64) do tokens[t] = 'r' end
  if due then tokens[#tokens + 1] = 's' end
  r = redis.pcall('LPUSH', wakes, unpack(tokens))
end
-- undo takes back the list and set writes above when a later write fails.
local function undo(tokens)
  if n_plain > 0 then redis.call('LTRIM', ready, n_plain, -1) end
  undo_keyed()
  if waiting then
    for d = 2, #waiting, 2 do redis.call('ZREM', string.sub(prefix, 1, -5) .. 'waiting', waiting[d]) end
  end
  if due then
    for d = 2, #due, 2 do redis.call('ZREM', scheduled, due[d]) end
  end
  if tokens > 0 then redis.call('LTRIM', wakes, tokens, -1) end
end
if type(r) == 'table' and r.err then
  undo(0)
  return r
end
-- One event per job written, after the writes above: the script has changed something by
-- now, so a full Redis cannot refuse the XADD (it refused the LPUSH or ZADD already). The
-- call's events are entries of up to 16 (the lib's event_buf and write_events), each XADD
-- checked (a key of the wrong type fails the first) so that the call can be undone.
if maxlen > 0 and (n_ready > 0 or due or waiting) then
  local tokens = math.min(n_ready, 64)
  if due then tokens = tokens + 1 end
  local ev = event_buf(events, maxlen)
  k = 0
  i = 4
  while i <= nargs do
    local typ, at = ARGV[i + 1], tonumber(ARGV[i + 5])
    local run_at = at
    if at == 0 then run_at = now + tonumber(ARGV[i + 4]) end
    local name = 'enqueued'
    if ARGV[i + 11] ~= '' then
      name = 'waiting'
    elseif run_at > now then
      name = 'scheduled'
    end
    local step = group_step(i)
    local j = i + 15
    for _ = 1, tonumber(ARGV[i]) do
      k = k + 1
      if codes[k] == '1' then event(ev, name, ARGV[j], typ, 0, '', '') end
      j = j + step
    end
    i = j
  end
  local e = write_events(ev, true)
  if e then
    undo(tokens)
    return e
  end
end
-- Tokens pile up only while no worker waits: trim them back to 128 once past 192, so an
-- enqueue seldom pays for the trim.
if r and r > 192 then redis.call('LTRIM', wakes, '0', '127') end

-- The job hashes. A hash whose values are all <= 64 bytes stays in Redis's compact
-- listpack encoding (hash-max-listpack-value), about half the memory of the hashtable
-- one, so a payload of up to 4 KiB is stored in 64-byte pieces: payload, payload+1, ...
-- The fields a group shares are set once in f; each job fills in the rest.
local sub = string.sub
-- Numbers given to redis.call are formatted on every call: format the shared ones once.
local now_s = string.format('%d', now)
local piece = {} -- piece[p] = 'payload+' .. p, made once per call, not once per job
-- The created_at decision of the last ID's time part: a batch's generated IDs mostly share it.
local last_t, last_needs = nil, nil
k = 0
i = 4
while i <= nargs do
  local unique, fresh = ARGV[i + 7] ~= '0', ARGV[i + 9] == '1'
  local at = tonumber(ARGV[i + 5])
  local run_at = at
  if at == 0 then run_at = now + tonumber(ARGV[i + 4]) end
  -- attempt is absent until the first claim (absent = 0): one field less per waiting job;
  -- max_retry and timeout_ms are absent at their defaults ("" here).
  local f = {'type', ARGV[i + 1]}
  local base = 2
  if ARGV[i + 2] ~= '' then f[3] = 'max_retry'; f[4] = ARGV[i + 2]; base = 4 end
  if ARGV[i + 3] ~= '' then f[base + 1] = 'timeout_ms'; f[base + 2] = ARGV[i + 3]; base = base + 2 end
  f[base + 1] = 'state'; f[base + 2] = 'ready'
  base = base + 2
  local after, deps, policy = ARGV[i + 11], nil, nil
  if after ~= '' then
    -- policy, then queue\tid pairs: the pending set's members, and the after field
    -- (queue\tid lines) that keeps the whole list for readers once the set empties.
    local t = string.find(after, '\t', 1, true)
    policy = string.sub(after, 1, t - 1)
    deps = refs(string.sub(after, t + 1))
    f[base] = 'waiting'
    f[base + 1] = 'after'; f[base + 2] = table.concat(deps, '\n')
    base = base + 2
    if policy == 'run' then
      f[base + 1] = 'dep_policy'; f[base + 2] = 'run'
      base = base + 2
    end
  elseif run_at > now then
    f[base] = 'scheduled'
    f[base + 1] = 'run_at'; f[base + 2] = string.format('%d', run_at)
    base = base + 2
  end
  if ARGV[i + 6] ~= '' then
    f[base + 1] = 'exclusive'; f[base + 2] = ARGV[i + 6]
    base = base + 2
  end
  if ARGV[i + 12] ~= '' then
    f[base + 1] = 'batch'; f[base + 2] = ARGV[i + 12]
    base = base + 2
  end
  local dependents = nil
  if ARGV[i + 13] ~= '' then
    dependents = refs(ARGV[i + 13])
    f[base + 1] = 'dependents'; f[base + 2] = '1'
    base = base + 2
  end
  -- key_f: where in f each job's own limit key goes (limit_key "\t").
  local key_f = nil
  if ARGV[i + 14] ~= '' then
    f[base + 1] = 'limit_key'; f[base + 2] = ARGV[i + 14]
    base = base + 2
    if ARGV[i + 14] == '\t' then key_f = base end
  end
  if ARGV[i + 9] ~= '1' and nonce ~= '' then
    f[base + 1] = 'enq'; f[base + 2] = nonce
    base = base + 2
  end
  if ARGV[i + 10] ~= '' then
    local kv = ARGV[i + 10]
    local at_kv = 1
    while true do
      local t1 = string.find(kv, '\t', at_kv, true)
      local t2 = t1 and string.find(kv, '\t', t1 + 1, true)
      f[base + 1] = 'm:' .. sub(kv, at_kv, t1 - 1)
      f[base + 2] = sub(kv, t1 + 1, (t2 or 0) - 1)
      base = base + 2
      if not t2 then break end
      at_kv = t2 + 1
    end
  end
  local ttl = ARGV[i + 7]
  if unique then
    if ARGV[i + 8] == '1' then
      f[base + 1] = 'unique_keep'; f[base + 2] = '1'
      base = base + 2
    end
    -- The TTL, for a retry of the job once dead to take its key back (retry.lua).
    f[base + 1] = 'unique_ttl'; f[base + 2] = ttl
    base = base + 2
    f[base + 1] = 'unique_key'
    base = base + 2
  end
  local step, key_at = group_step(i)
  local j = i + 15
  for _ = 1, tonumber(ARGV[i]) do
    k = k + 1
    if codes[k] == '1' then
      local id = ARGV[j]
      if key_f then f[key_f] = ARGV[j + key_at] end
      if unique then
        redis.call('SET', ARGV[j + 2], id, 'PX', ttl)
        f[base] = ARGV[j + 2]
      end
      local m = base
      local t = fresh and #id == 26 and sub(id, 1, 10)
      if t ~= last_t then last_t, last_needs = t, needs_created(id, fresh) end
      if last_needs then
        f[m + 1] = 'created_at'; f[m + 2] = now_s
        m = m + 2
      end
      m = add_payload(f, m, ARGV[j + 1], piece)
      redis.call('HSET', keys[k], unpack(f, 1, m))
      if deps then redis.call('SADD', string.sub(prefix, 1, -5) .. 'deps:' .. id, unpack(deps)) end
      if dependents then redis.call('SADD', string.sub(prefix, 1, -5) .. 'dependents:' .. id, unpack(dependents)) end
    end
    j = j + step
  end
  i = j
end
local out = table.concat(codes)
if some_exist then out = string.gsub(out, 'e', '1') end
if holders then return {out, unpack(holders)} end
return {out}
