-- The lib's keyed jobs and their limits (see base.lua).

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

-- behind_paused keeps the job a handler paused its key with (PauseKey: kpause:K holds its
-- ID) first in K's list, as PauseKey promises, and the key's other jobs in their order: a
-- job of K put back at the head during the pause (claimed ahead before it began and handed
-- back, or reaped; one call each, in any order) goes behind the paused job and behind
-- those put back before it that are older (smaller IDs: every job put back was claimed,
-- so it is older than any the list still holds). Called after push_ready put id at the
-- head; the paused job is then the list's last but one. A few LINDEX and LSET at the
-- list's end: as many as the jobs put back during the pause.
local function behind_paused(prefix, lkey, id)
  local base = key_base(prefix)
  local paused = redis.call('GET', base .. 'kpause:' .. lkey)
  if not paused or paused == id then return end
  local list = base .. 'kready:' .. lkey
  if redis.call('LINDEX', list, -2) ~= paused then return end
  local older, i = {}, -3
  while true do
    local e = redis.call('LINDEX', list, i)
    if not e or e > id then break end
    older[#older + 1] = e
    i = i - 1
  end
  redis.call('LSET', list, -1, paused)
  for j, e in ipairs(older) do redis.call('LSET', list, -1 - j, e) end
  redis.call('LSET', list, -2 - #older, id)
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

-- limit_fields reads the fields of the queue's limits HASH (jobs:{q}:limit) that claims
-- and acks use, in this order: concurrency, rate, period_ms, burst, tat, ktrack, key
-- (the keys' default limits), kown, kflags (see limit.lua).
local function limit_fields(limit)
  return redis.call('HMGET', limit, 'concurrency', 'rate', 'period_ms', 'burst', 'tat', 'ktrack', 'key', 'kown',
    'kflags')
end

-- key_tracked says whether the keys' leases are kept (key_flags). track: {limit =
-- jobs:{q}:limit}, one per script call: the flags are read once, at the call's first
-- keyed job, with the other limits (limit_fields, kept in track.l: an ack's claim after
-- it, ackclaim.lua, reads them there instead of again: nothing the ack does changes them).
local function key_tracked(track)
  if track.on == nil then
    local l = limit_fields(track.limit)
    track.l, track.on = l, key_flags(track.limit, l[6], nil, l[9])
    if not l[9] then
      -- Read without kflags (no hash, or one from before the flags): the fields as
      -- key_flags read them, with kflags, so that the claim reading them after does not
      -- ask Redis again.
      l[6], l[8], l[9] = track.on and '1', track.on and '1', '1'
    end
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
-- a claim of n then serves about n/q keys, not n. waiting: the keys with ready jobs (the
-- ring's size). Each key served costs Redis about a fifth of what a job costs it (its
-- RPOP, its new place in the ring, a look at its list, the Lua around them: about
-- 20,000 instructions under callgrind, a job about 103,000): taken one job a key, keyed
-- jobs over 1,000 keys ran at 0.8x the throughput of unkeyed ones. The quantum is 4 up
-- to 256 keys waiting, then grows with them (one more job a key per 64 keys) up to 16
-- from 961 keys: over 1,000 keys a claim of 100 serves about 7 keys instead of 25, and a
-- claim of 10 one instead of 3 (BENCHMARKS.md, keyed jobs).
-- Fairness is kept at the grain of q jobs: every due key is served in turn, each as
-- much, and a key with fewer jobs (the issue's case: B's one job beside A's 100,000) is
-- served in the first claim as before; with K keys due, a key's turn comes within about
-- qK/n claims (K/n with one job a key), at most 16K/n.
local function key_quantum(waiting)
  return math.min(16, math.max(4, math.ceil(waiting / 64)))
end

-- due_keys fetches the keys of ring due now (us), oldest first, for a claim of up to n
-- keyed jobs: a first look takes about n/q of them (q: key_quantum), enough when each
-- has q jobs (one ZRANGEBYSCORE of a few keys, not of n); pop_keyed takes more
-- (due_more) only when they ran short. Returns a record: keys (the array of them) and n
-- (how many); q; waiting (the ring's size); full, true when more keys may be due after
-- them; now_s; nil when the ring is empty (no keyed job waits). A record built whole:
-- fields added to the reply's array one by one rebuilt its hash part three times.
local function due_keys(ring, now_us, n)
  local waiting = redis.call('ZCARD', ring)
  if waiting == 0 then return nil end
  local q = key_quantum(waiting)
  local ask = math.ceil(n / q) + 2
  -- The numbers as strings, now_us formatted once for the claim (due.now_s, also the
  -- served keys' new score: key_claimed): Redis formats a number argument with a printf
  -- of %.17g, about a third of this call's cost.
  local now_s = string.format('%d', now_us)
  local keys = redis.call('ZRANGEBYSCORE', ring, '-inf', now_s, 'LIMIT', '0', string.format('%d', ask))
  return {keys = keys, n = #keys, q = q, waiting = waiting, full = #keys == ask, now_s = now_s}
end

-- due_more appends to due (from due_keys) the next keys due now, up to left + 16 of them
-- (as many as a claim of left jobs could serve one job each), when more may be due.
-- Returns how many it appended.
local function due_more(ring, due, left)
  if not due.full then return 0 end
  local ask = left + 16
  local more = redis.call('ZRANGEBYSCORE', ring, '-inf', due.now_s, 'LIMIT', due.n, ask)
  for _, k in ipairs(more) do
    due.n = due.n + 1
    due.keys[due.n] = k
  end
  due.full = #more == ask
  return #more
end

-- due_last is the place in due of the last key that may be due now: due.n unless due is
-- full, and then at most the ring's size (waiting). A key's share of a claim is what is
-- left divided by the keys that may be due from its place i on, due_last(due) - i + 1
-- (pop_keyed). Changed only by due_more: read again after it.
local function due_last(due)
  if due.full and due.waiting > due.n then return due.waiting end
  return due.n
end

-- key_spec parses a key limit as limit.lua stores it: "concurrency rate period_ms burst",
-- 0 for none of a kind. nil for none at all.
local function key_spec(s)
  if not s then return nil end
  local c, r, p, b = string.match(s, '^(%d+) (%d+) (%d+) (%d+)$')
  if not c then return nil end
  return {conc = tonumber(c), rate = tonumber(r), period = tonumber(p), burst = math.max(tonumber(b), 1)}
end

-- key_specs reads the own limits of due's keys from the from-th on (the limits HASH's
-- fields 'key:'..K) into specs at the same places (false: none).
local function key_specs(limit, due, from, specs)
  local fields = {}
  for i = from, due.n do fields[#fields + 1] = 'key:' .. due.keys[i] end
  if #fields == 0 then return end
  local got = redis.call('HMGET', limit, unpack(fields))
  for j, v in ipairs(got) do specs[from + j - 1] = v end
end

-- list_pop pops up to room job IDs (room > 0) from the key's list list, oldest first,
-- onto ids (n of them so far). counts: the claim's cache of counts formatted. Returns the
-- new n.
local function list_pop(list, room, ids, n, counts)
  if room == 1 then
    -- RPOP without a count returns the ID itself: no array to build, about half the
    -- cost of a call with one (a claim over many keys takes one job of each).
    local id = redis.call('RPOP', list)
    if id then
      n = n + 1
      ids[n] = id
    end
    return n
  end
  -- The count as a string: Redis would format a number with a slow printf.
  local c = counts[room]
  if not c then
    c = string.format('%d', room)
    counts[room] = c
  end
  local got = redis.call('RPOP', list, c)
  if got then
    -- Numeric loops: ipairs calls its iterator (a C function) once per job.
    for j = 1, #got do ids[n + j] = got[j] end
    n = n + #got
  end
  return n
end

-- key_pop pops up to room more job IDs of key record r (pop_keyed's) as list_pop does,
-- and puts r at the same places in keyof when the claim must count its jobs (r.act:
-- their leases; r.tau: its rate's tokens; else nothing of the key follows a job, and
-- keyof is left alone); r.room and r.popped count what the key was asked for and gave (a
-- key that gave less than it was asked for ran dry: key_claimed). Returns the new n.
local function key_pop(r, room, ids, keyof, n, counts)
  if room <= 0 then return n end
  r.room = r.room + room
  local from = n
  n = list_pop(r.list, room, ids, n, counts)
  r.popped = r.popped + n - from
  if r.act or r.tau then
    for j = from + 1, n do keyof[j] = r end
  end
  return n
end

-- key_room is how many jobs a due key is asked for: its share of the left the claim still
-- wants over the keys that may be due from it on (keys), at least q (key_quantum) while
-- left allows: max(ceil(left / keys), min(q, left)), without a call to math.
local function key_room(left, keys, q)
  local share = left / keys
  local room = share - share % 1
  if room < share then room = room + 1 end
  if room < q and room < left then
    room = q
    if left < room then room = left end
  end
  return room
end

-- pop_plain is pop_keyed for a claim no key's limits can cut: no key's leases are kept
-- (g.ktrack off: no key's concurrency could bind) and no key has a rate, its own or the
-- default. Each due key gives its share (as in pop_keyed), and nothing follows a key or
-- its jobs but its place in the ring, so no record is built per key (a Lua table costs
-- about 3,000 Redis instructions, made and collected; each served key's part of the
-- claim cost about 16,000 with one): the keys that gave all they were asked for (they
-- may have more) go in lists (their lists) and places (the ring's ZADD arguments: now
-- and the key), those that gave less (their list is gone) in gone. Returns {lists,
-- places, nl (how many in lists), gone, ng}, which key_claimed settles.
local function pop_plain(due, want, base, ids)
  local kready, keys, q, now_s = base .. 'kready:', due.keys, due.q, due.now_s
  local lists, places, gone, nl, ng = {}, {}, {}, 0, 0
  local n, counts, i, last = #ids, {}, 0, due_last(due)
  while true do
    local left = want - n
    if left <= 0 then break end
    i = i + 1
    if i > due.n then
      -- The keys looked at ran short (some had fewer than their share): look further.
      if due_more(base .. 'keys', due, left) == 0 then break end
      last = due_last(due)
    end
    local k = keys[i]
    local room = key_room(left, last - i + 1, q)
    local list = kready .. k
    local from = n
    n = list_pop(list, room, ids, n, counts)
    if n - from < room then
      ng = ng + 1
      gone[ng] = k
    else
      nl = nl + 1
      lists[nl], places[2 * nl - 1], places[2 * nl] = list, now_s, k
    end
  end
  -- Every due key had its turn and the claim is still short: the keys that gave all
  -- they were asked for give more, in the same order, each what is left at most (as in
  -- pop_keyed, without limits).
  if want - n > 0 and nl > 0 then
    local kept_lists, kept_places, kept = {}, {}, 0
    for c = 1, nl do
      local left = want - n
      local from = n
      if left > 0 then n = list_pop(lists[c], left, ids, n, counts) end
      if n - from < left then
        ng = ng + 1
        gone[ng] = places[2 * c]
      else
        kept = kept + 1
        kept_lists[kept], kept_places[2 * kept - 1], kept_places[2 * kept] = lists[c], now_s, places[2 * c]
      end
    end
    lists, places, nl = kept_lists, kept_places, kept
  end
  return {lists = lists, places = places, nl = nl, gone = gone, ng = ng}
end

-- pop_keyed pops up to want job IDs from the due keys (ring order: due, from due_keys,
-- extended by due_more when its keys run short), each key giving its share of what is
-- left (round-robin), at least due.q of them (key_quantum; fewer when it has fewer, or
-- want is met), and at most what its limits allow now: its
-- concurrency counts its unexpired leases, its rate is GCRA as the queue's (limit_room),
-- its tokens due within rate_ahead() claimed ahead when the queue has no rate.
-- limit: the queue's limits HASH ('key:'..K a key's own limits, read only while g.kown);
-- g: limit_room's reply (g.kdef the default of every key, g.running when the queue has a
-- concurrency limit).
-- Appends to ids and keyof (the key's record of each); returns the per-key records that
-- key_claimed settles once the claim knows which jobs it took (pop_plain's reply instead
-- when no key's limits can cut the claim).
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
  -- No key's limits can cut this claim: nothing to follow per key (pop_plain). The keys'
  -- default has no rate when it has none of any kind or its rate is 0 (key_spec's
  -- format), found without parsing it.
  if not g.ktrack and not g.kown and (not g.kdef or string.find(g.kdef, '^%d+ 0 ')) then
    return pop_plain(due, want, base, ids)
  end
  -- The keys' own limits, when some key has one (the field kown, see limit.lua).
  local specs = nil
  if g.kown then
    specs = {}
    key_specs(limit, due, 1, specs)
  end
  local default = key_spec(g.kdef)
  local recs, n, counts, i, last = {}, #ids, {}, 0, due_last(due)
  while true do
    local left = want - n
    if left <= 0 then break end
    i = i + 1
    if i > due.n then
      -- The keys looked at ran short (some had fewer than their share): look further.
      if due_more(base .. 'keys', due, left) == 0 then break end
      last = due_last(due)
      if g.kown then key_specs(limit, due, i, specs) end
    end
    local k = due.keys[i]
    local sp = default
    if specs and specs[i] then sp = key_spec(specs[i]) or default end
    -- dry named too (key_claimed sets it): a table built with room for its fields is not
    -- rebuilt when one is set.
    local r = {key = k, list = base .. 'kready:' .. k, m = 0, popped = 0, room = 0, dry = false}
    -- Every key's leases are kept while any key's concurrency could bind: a concurrency
    -- set on this key later applies to its running jobs on the next claim.
    if g.ktrack then r.act, r.ids = base .. 'kactive:' .. k, {} end
    local room = key_room(left, last - i + 1, due.q)
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
      -- A tat further ahead than this rate can put it (its burst and one more token past
      -- the tokens claimed ahead) was spent under another rate: the key's was raised
      -- since. It is void, so the raised rate applies at once, as the queue's does
      -- (limit.lua drops its tat); a tat this rate could have made is kept, so setting
      -- the same limits again lets no burst through.
      local t = tonumber(redis.call('GET', r.tat)) or 0
      if t > now_us + rate_ahead() + (sp.burst + 1) * r.tau then t = 0 end
      r.base = math.max(t, now_us)
      -- The tokens due within rate_ahead(), as the queue's (limit_room): each such job
      -- starts at its token's instant (claim_jobs). Not under a queue rate, whose token
      -- instants the claim's jobs start at: one held for its key's later token would
      -- start after its queue token's, and the queue's starts could bunch up.
      r.ahead = 0
      if not g.tau then r.ahead = rate_ahead() end
      r.tokens = math.floor((now_us + r.ahead + sp.burst * r.tau - r.base) / r.tau)
      room = math.min(room, math.max(r.tokens, 0))
    end
    n = key_pop(r, room, ids, keyof, n, counts)
    recs[#recs + 1] = r
  end
  -- Every due key had its turn and the claim is still short (a key's share was its
  -- quantum, and keys after it had fewer jobs): the keys that gave all they were asked
  -- for (they may have more) give more, in the same order, each what is left at most
  -- and what its limits allow, so a claim takes all it asks for while a due key has jobs
  -- its limits let go (one more RPOP a key at most).
  if want - n > 0 then
    for _, r in ipairs(recs) do
      local left = want - n
      if left <= 0 then break end
      local room = 0
      if r.room > 0 and r.popped == r.room then room = left end
      if r.free then room = math.min(room, r.free - r.popped) end
      if r.tokens then room = math.min(room, r.tokens - r.popped) end
      n = key_pop(r, room, ids, keyof, n, counts)
    end
  end
  return recs
end

-- dry_lists says which of lists[1..nl] are gone, missing of them being gone (an EXISTS
-- of them all counted nl - missing): one EXISTS each from the last on (most often the
-- last key served, asked for what the claim lacked, gave its last job) until all the
-- missing are found, none when all that are left are. Returns true at their places.
local function dry_lists(lists, nl, missing)
  local dry = {}
  for c = nl, 1, -1 do
    if missing == 0 then break end
    if missing == c or redis.call('EXISTS', lists[c]) == 0 then
      dry[c] = true
      missing = missing - 1
    end
  end
  return dry
end

-- plain_claimed is key_claimed for pop_plain's keys (p, its reply): each gets its next
-- place in the ring, now (behind the keys due before it) or gone when it has no job
-- left. Which of those that gave all they were asked for ran dry is one EXISTS of their
-- lists (dry_lists when it says some did).
local function plain_claimed(ring, p)
  local places, gone, nl, ng = p.places, p.gone, p.nl, p.ng
  if nl > 0 then
    local missing = nl - redis.call('EXISTS', unpack(p.lists, 1, nl))
    if missing > 0 then
      local dry, kept = dry_lists(p.lists, nl, missing), 0
      for c = 1, nl do
        if dry[c] then
          ng = ng + 1
          gone[ng] = places[2 * c]
        else
          kept = kept + 1
          places[2 * kept - 1], places[2 * kept] = places[2 * c - 1], places[2 * c]
        end
      end
      nl = kept
    end
  end
  if nl > 0 then redis.call('ZADD', ring, unpack(places, 1, 2 * nl)) end
  if ng > 0 then redis.call('ZREM', ring, unpack(gone, 1, ng)) end
end

-- key_claimed settles the keys pop_keyed took from: the leases of the jobs claimed
-- (r.m of them, counted for a key with r.act or r.tau only; their IDs r.ids while the
-- leases are kept) go into the key's lease set, its rate's tat moves on by one tau each, and the
-- key gets its next place in the ring: gone when it has no job left, else now (behind
-- the keys due before it), or later when a limit holds it back: its earliest lease
-- deadline (concurrency) or its next token (rate), whichever is later. Which keys ran
-- dry is one EXISTS of their lists, not an LLEN each: a key that gave less than it asked
-- for has; one that gave all may have (dry_lists finds which when the EXISTS says some
-- did). recs: pop_keyed's reply (pop_plain's: plain_claimed).
local function key_claimed(ring, recs, deadline, now, now_us, now_s)
  if recs.places then return plain_claimed(ring, recs) end
  -- The ring's changes go in one ZADD and one ZREM: a claim may serve a hundred keys.
  -- Numeric loops: ipairs calls its iterator (a C function) once per key.
  local places, gone, lists, maybe, nrecs = {}, {}, {}, {}, #recs
  for j = 1, nrecs do
    local r = recs[j]
    if r.room > 0 and r.popped < r.room then
      r.dry = true
    else
      lists[#lists + 1] = r.list
      maybe[#lists] = r
    end
  end
  local missing = #lists > 0 and #lists - redis.call('EXISTS', unpack(lists)) or 0
  if missing > 0 then
    for c in pairs(dry_lists(lists, #lists, missing)) do maybe[c].dry = true end
  end
  for j = 1, nrecs do
    local r = recs[j]
    local m = r.m
    if m > 0 and r.act then
      local z = {}
      for _, id in ipairs(r.ids) do z[#z + 1] = deadline; z[#z + 1] = id end
      redis.call('ZADD', r.act, unpack(z))
    end
    local at = now_us
    local tat = r.tau and (r.next_tat or r.base)
    if r.tau and m > 0 then
      redis.call('SET', r.tat, string.format('%d', tat), 'PX', math.floor((tat - now_us) / 1000) + 1)
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
      -- now_us formatted once (now_s): Redis formats a number argument with a slow printf.
      if at == now_us then
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
