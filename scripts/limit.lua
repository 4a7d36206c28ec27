-- limit: sets or removes a queue's limits (`jobs limit set|rm`, Client.SetLimit,
-- Client.RemoveLimit). No job moves; the next claim of the queue applies the change (the
-- claims read the hash: see limit_room in scripts/lib). One script so that the change, its
-- event and the notice to waiting workers are one step.
--
-- KEYS[1]  jobs:{q}:limit       HASH  concurrency (running jobs), rate (starts per
--                               period_ms), period_ms, burst, tat (the rate's GCRA state,
--                               us; written by claims); key (the default limits of every
--                               limit key) and key:<K> (a key's own), see ARGV[12..]
-- KEYS[2]  jobs:{q}:events      STREAM one 'limit' entry per call that changed something,
--                               its error field the limits now ("" when none is left):
--                               the queue's, the keys' default, how many keys have their
--                               own, and those of the keys named (ARGV[12..], 10 at most)
-- KEYS[3]  jobs:{q}:active      ZSET  job ID -> lease deadline (ms), read when the field
--                               ktrack flips (below)
-- Keys     named from KEYS[1] ("jobs:{q}:", see the lib's keyed jobs), when ktrack flips:
--          jobs:{q}:job:<id> (read: limit_key) of each job in active, jobs:{q}:kactive:K
--          of their keys (rebuilt or deleted); jobs:{q}:keys and jobs:{q}:kpause:K
--          (keys brought forward) when key limits change or ktrack goes off
-- ARGV[1]  concurrency          "": unchanged; "0": removed; N > 0: set
-- ARGV[2]  rate                 "": unchanged; "0": removed (with period_ms, burst, tat);
--                               N > 0: set with ARGV[3] and ARGV[4]
-- ARGV[3]  period_ms            the rate's period (> 0), with a rate
-- ARGV[4]  burst                starts allowed at once (>= 1), with a rate
-- ARGV[5]  channel              the notice channel ("jobs:cancel"): "<queue>" is published
--                               on it when the limits changed, so workers waiting on the
--                               old limits claim again at once
-- ARGV[6]  queue                the queue's name, for the notice
-- ARGV[7]  events_max           the events stream keeps about this many entries (<= 0: none)
-- ARGV[8]  key concurrency      per key: "" unchanged, "0" removed, N > 0 set; "*": every
--                               per-key limit removed, the default and the overrides
-- ARGV[9]  key rate             per key: "" unchanged, "0" removed (with its period and
--                               burst), N > 0 set with ARGV[10] and ARGV[11]
-- ARGV[10] key period_ms
-- ARGV[11] key burst
-- ARGV[12..] limit keys         none: ARGV[8..11] change the default of every key (field
--                               'key'); else the own limits of these keys (fields
--                               'key:'..K), which replace the default for them. Each is
--                               stored as "concurrency rate period_ms burst" (0: none of
--                               that kind; the lib's key_spec reads it), removed when
--                               nothing is left in it. A key's rate state (its tat, in
--                               jobs:{q}:ktat:K) is left: a claim voids one further
--                               ahead than the key's rate now allows, so a raised key
--                               rate applies at once, as the queue's does.
--          The field ktrack is '1' while some key's concurrency could bind: a default or
--          own key concurrency below the queue's concurrency, or with none on the queue (a
--          key's leases are among the queue's, which a claim never takes past its limit).
--          Only then are the keys' leases kept (jobs:{q}:kactive:K): when it goes on, every
--          kactive:K is rebuilt from the leases in active (O(jobs running), once per
--          change), so a key concurrency set on running jobs counts them at the next
--          claim; when it goes off, they are deleted, and the keys the ring holds back
--          for later, not by a handler's pause, are brought forward to now (a claim puts
--          one its rate holds back at its next token again). So are they when key
--          limits change (the keys named, or all when the default changed): raised key
--          limits apply at the next claim.
-- Returns  1 if the limits changed, 0 if they already were so (nothing written).
-- Clock    Redis TIME, only when key limits changed or ktrack goes off (the ring's now).
-- Invariant a queue rate whose rate, period or burst changed starts afresh (tat removed: a full
--          burst is allowed at once); an unchanged one keeps its tat, so setting the
--          same limits again never lets a burst through. The hash is gone when no limit
--          is left (Redis deletes an empty hash).

local limit, events = KEYS[1], KEYS[2]
local conc, rate, period, burst = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local old = redis.call('HMGET', limit, 'concurrency', 'rate', 'period_ms', 'burst', 'ktrack', 'kflags')
-- Whether the keys' leases were kept before this change: limits written before this
-- script kept ktrack (no kflags) were read as keeping them (key_flags in scripts/lib).
local tracked = key_flags(limit, old[5], nil, old[6])
local changed = false
if conc == '0' then
  changed = redis.call('HDEL', limit, 'concurrency') == 1
elseif conc ~= '' and conc ~= old[1] then
  redis.call('HSET', limit, 'concurrency', conc)
  changed = true
end
if rate == '0' then
  if redis.call('HDEL', limit, 'rate', 'period_ms', 'burst', 'tat') > 0 then changed = true end
elseif rate ~= '' and (rate ~= old[2] or period ~= old[3] or burst ~= old[4]) then
  redis.call('HSET', limit, 'rate', rate, 'period_ms', period, 'burst', burst)
  redis.call('HDEL', limit, 'tat')
  changed = true
end
-- Per-key limits: the default ('key') or the overrides named.
local kc, kr, kp, kb = ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local fields, kchanged = {}, false
if #ARGV < 12 then fields[1] = 'key' end
for i = 12, #ARGV do fields[#fields + 1] = 'key:' .. ARGV[i] end
if kc == '*' then
  -- Every per-key limit, the default and the overrides.
  for _, f in ipairs(redis.call('HKEYS', limit)) do
    if f == 'key' or string.sub(f, 1, 4) == 'key:' then
      redis.call('HDEL', limit, f)
      changed, kchanged = true, true
    end
  end
  fields = {'key'} -- every key's limits changed: see the ring below
elseif kc ~= '' or kr ~= '' then
  for _, f in ipairs(fields) do
    local cur = redis.call('HGET', limit, f)
    local c, r, p, b = '0', '0', '0', '0'
    if cur then c, r, p, b = string.match(cur, '^(%d+) (%d+) (%d+) (%d+)$') end
    if kc ~= '' then c = kc end
    if kr == '0' then
      r, p, b = '0', '0', '0'
    elseif kr ~= '' then
      r, p, b = kr, kp, kb
    end
    local v = c .. ' ' .. r .. ' ' .. p .. ' ' .. b
    if v == '0 0 0 0' then
      if cur then
        redis.call('HDEL', limit, f)
        changed, kchanged = true, true
      end
    elseif v ~= cur then
      redis.call('HSET', limit, f, v)
      changed, kchanged = true, true
    end
  end
end
if not changed then return 0 end

-- zadd_all adds the score/member pairs of z to the ZSET key, 1,000 pairs a call: unpack
-- fails past a few thousand values, and a key may have more jobs running.
local function zadd_all(key, z)
  for i = 1, #z, 2000 do
    redis.call('ZADD', key, unpack(z, i, math.min(i + 1999, #z)))
  end
end

-- base: "jobs:{q}:", that the keys named from KEYS[1] are built on.
local base = string.sub(limit, 1, -6)
-- ktrack: could some key's concurrency bind (see the header)? h: the limits as this call
-- left them (nothing below changes a limit, only the flags), also for the event.
local h, track = {}, false
local all = redis.call('HGETALL', limit)
for i = 1, #all, 2 do h[all[i]] = all[i + 1] end
local qconc, owned = tonumber(h.concurrency) or 0, 0
for f, v in pairs(h) do
  if f == 'key' or string.sub(f, 1, 4) == 'key:' then
    if f ~= 'key' then owned = owned + 1 end
    local c = tonumber(string.match(v, '^(%d+) '))
    if c and c > 0 and (qconc == 0 or c < qconc) then track = true end
  end
end
-- kown: '1' while some key has its own limits, so that a claim reads the keys' own
-- fields (one HMGET of a field per key served) only then.
local own = owned > 0
if own and h.kown ~= '1' then
  redis.call('HSET', limit, 'kown', '1')
elseif not own and h.kown then
  redis.call('HDEL', limit, 'kown')
end
if track and h.ktrack ~= '1' and tracked then
  redis.call('HSET', limit, 'ktrack', '1') -- limits from before kflags: their leases are kept
elseif track ~= tracked then
  -- Every lease in active (expired ones too, until reaped: kactive:K holds exactly the
  -- leases of K's jobs in active), grouped by key.
  local leases, byk, keys = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), {}, {}
  for i = 1, #leases, 2 do
    local lk = redis.call('HGET', base .. 'job:' .. leases[i], 'limit_key')
    if lk then
      if not byk[lk] then
        byk[lk] = {}
        keys[#keys + 1] = lk
      end
      local z = byk[lk]
      z[#z + 1] = leases[i + 1]
      z[#z + 1] = leases[i]
    end
  end
  for _, lk in ipairs(keys) do redis.call('DEL', base .. 'kactive:' .. lk) end
  if track then
    redis.call('HSET', limit, 'ktrack', '1')
    for _, lk in ipairs(keys) do zadd_all(base .. 'kactive:' .. lk, byk[lk]) end
  else
    redis.call('HDEL', limit, 'ktrack')
    -- No key waits on a concurrency now: none may stay held back for one.
    kchanged, fields = true, {'key'}
  end
end
-- Keys the ring holds back for later under the old limits (their earliest lease deadline,
-- their next token) are brought forward to now, so that raised limits apply at the next
-- claim: the keys named, or all of them when the default changed. A claim puts back one
-- the new limits still hold. Not a key a handler paused (kpause:K): its pause stands.
if kchanged and #fields > 0 then
  local ring = base .. 'keys'
  -- now in us as an integer string: Lua's tostring keeps 14 digits of its 16.
  local us = string.format('%.0f', now_us())
  local later, places = {}, {}
  if fields[1] == 'key' then
    later = redis.call('ZRANGEBYSCORE', ring, '(' .. us, '+inf')
  else
    for _, f in ipairs(fields) do
      local k = string.sub(f, 5)
      local at = tonumber(redis.call('ZSCORE', ring, k))
      if at and at > tonumber(us) then later[#later + 1] = k end
    end
  end
  for _, lk in ipairs(later) do
    if redis.call('EXISTS', base .. 'kpause:' .. lk) == 0 then
      places[#places + 1] = us
      places[#places + 1] = lk
    end
  end
  zadd_all(ring, places)
end
-- kflags: this script keeps ktrack and kown in these limits (key_flags in scripts/lib). Only
-- while some limit is left: Redis deletes an empty hash, and no limits is no hash.
local fields, flagged = redis.call('HKEYS', limit), false
for _, f in ipairs(fields) do flagged = flagged or f == 'kflags' end
if #fields > (flagged and 1 or 0) then
  if not flagged then redis.call('HSET', limit, 'kflags', '1') end
elseif flagged then
  redis.call('DEL', limit)
end
-- The event says what the limits are now, in a line of bounded length whatever the number
-- of keys with their own limits: the queue's, the keys' default, how many keys have their
-- own, and the own limits of the keys this call named (10 at most).
local function spec_text(v)
  if not v then return 'back to the default' end
  local c, r, p, b = string.match(v, '^(%d+) (%d+) (%d+) (%d+)$')
  local t = {}
  if c and c ~= '0' then t[#t + 1] = 'concurrency ' .. c end
  if r and r ~= '0' then t[#t + 1] = 'rate ' .. r .. '/' .. p .. 'ms burst ' .. b end
  if #t == 0 then return 'none' end
  return table.concat(t, ' ')
end
local desc = {}
if h.concurrency then desc[#desc + 1] = 'concurrency ' .. h.concurrency end
if h.rate then desc[#desc + 1] = 'rate ' .. h.rate .. '/' .. h.period_ms .. 'ms burst ' .. h.burst end
if h.key then desc[#desc + 1] = 'every key ' .. spec_text(h.key) end
if owned > 0 then desc[#desc + 1] = owned .. ' keys with limits of their own' end
if #ARGV >= 12 and (kc ~= '' or kr ~= '') then
  for i = 12, math.min(#ARGV, 21) do
    desc[#desc + 1] = 'key ' .. ARGV[i] .. ' ' .. spec_text(h['key:' .. ARGV[i]])
  end
  if #ARGV > 21 then desc[#desc + 1] = 'and ' .. (#ARGV - 21) .. ' more keys' end
end
redis.call('PUBLISH', ARGV[5], ARGV[6])
local ev = event_buf(events, tonumber(ARGV[7]))
event(ev, 'limit', '', '', 0, '', table.concat(desc, ', '))
write_events(ev)
return 1
