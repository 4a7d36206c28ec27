-- The lib's acks, queue limits, claims and hand-offs (see base.lua).

-- ack_jobs settles jobs whose handler succeeded (ack.lua, ackclaim.lua): each goes from
-- active to done, or to dead if an operator cancelled it meanwhile (its hash has cancel):
-- a cancel is final whatever the handler did, as on every other path (fail, handback,
-- reap). k holds the keys and settings: active, done, dead (keys), prefix, stats (key
-- prefixes), retention (and retention_s, the same as given: a string), done_max, dead_retention, dead_max, and ev, the call's events
-- buffer (see event_buf; the caller writes it). argv[from], argv[from+1],
-- argv[from+2], ... are groups of id, lease token, result. hints has one character per
-- group: '1' when the caller's copy of that job came from its claim and its hash had none
-- of unique_key, batch and limit_key then (fields no script changes while a lease holds,
-- and a lease is one claim's), so only the fields that can change meanwhile (lease,
-- cancel, dependents) and the event's are read; '2' the same for a job that had a
-- limit_key (read too, only while the keys' leases are kept: key_tracked); anything else
-- (or none): all are read. A plain job's ack reads 6 fields instead of 10, a keyed one 6
-- or 7, most of the others absent: each absent field is a scan of the whole hash.
-- A done job keeps its hash for retention ms (<= 0: deleted at once) in the done set,
-- trimmed to done_max; a cancelled one goes through to_dead with last_error "cancelled by
-- operator" and counts as failed.
-- Returns one integer per group: 1 done, 2 done already by this very lease (a resent ack;
-- nothing changed), 3 cancelled: dead (now or, for a resent ack, already), 0 lease lost
-- (nothing changed for that job). Its first write is a ZREM: see below. Each settled job
-- gets one event in k.ev: done, or dead for a cancelled one (whose attempt is also recorded
-- in its history; a done attempt needs no record, see add_attempt). k.freed is set to the
-- number of jobs settled (slots freed, for wake_freed). A keyed job's slot under its key
-- is freed too, one key_freed per key (k.wakes: the wake list, k.track: see key_tracked).
local function ack_jobs(k, now, argv, from, hints)
  local prefix = k.prefix
  -- at[n]: where in argv the group of the n-th finished job starts (id, token, result).
  local out, finished, held, at = {}, {}, {}, {}
  -- Whether the keys' leases are kept, once the first keyed job asks (key_tracked).
  local tracked = nil
  for i = from, #argv, 3 do
    local job
    local hint = string.byte(hints, #out + 1)
    if hint == 50 and tracked == nil then tracked = key_tracked(k.track) end
    if hint == 49 or (hint == 50 and not tracked) then
      -- '1': a plain job (see above); or '2', a keyed one, while no key's leases are kept
      -- (key_tracked: one read of the limits a call, which a claim after the acks reuses):
      -- its key has no lease to free then, and is not read.
      local j = redis.call('HMGET', prefix .. argv[i], 'lease', 'cancel', 'type', 'attempt', 'worker', 'dependents')
      job = {j[1], false, false, j[2], j[3], j[4], j[5], j[6], false, false}
    elseif hint == 50 then -- '2': a keyed job otherwise plain
      local j = redis.call('HMGET', prefix .. argv[i], 'lease', 'cancel', 'type', 'attempt', 'worker', 'dependents',
        'limit_key')
      job = {j[1], false, false, j[2], j[3], j[4], j[5], j[6], false, j[7]}
    else
      job = redis.call('HMGET', prefix .. argv[i], 'lease', 'unique_key', 'unique_keep', 'cancel',
        'type', 'attempt', 'worker', 'dependents', 'batch', 'limit_key')
    end
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
  -- gone: the hashes of done jobs not kept, deleted by one DEL after the loop. etyp,
  -- eatt, ewkr: the type, attempt and worker of the done event added last (etyp = k:
  -- none, or another event came since), for event_again.
  local byk, keys, gone = {}, {}, {}
  local etyp, eatt, ewkr = k, nil, nil
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
      etyp = k
      cancelled = cancelled + 1
    else
      if not (job[5] == etyp and job[6] == eatt and job[7] == ewkr and event_again(k.ev, id)) then
        event(k.ev, 'done', id, job[5], job[6], job[7], '')
        etyp, eatt, ewkr = job[5], job[6], job[7]
      end
      if held[n][2] then release_held(held[n][2], held[n][3], id) end
      -- A job something waits on (a dependent, a batch) is followed once its own state is
      -- written; a plain job pays only the two fields of the HMGET above.
      if job[8] or job[9] then
        linked = linked or {}
        linked[#linked + 1] = {id, 'done', job[8], job[9]}
      end
      if k.retention <= 0 then
        gone[#gone + 1] = key
      else
        redis.call('HSET', key, 'state', 'done', 'finished_at', now_s, 'result', argv[at[n] + 2], 'lease',
          ended_lease('done', token))
        redis.call('PEXPIRE', key, k.retention_s)
        kept[#kept + 1] = now_s
        kept[#kept + 1] = id
      end
    end
  end
  if #gone > 0 then redis.call('DEL', unpack(gone)) end
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
-- (nil: neither); with a concurrency limit, g.running (the unexpired leases; or, with
-- g.bound set, all leases, when even they leave room for the n jobs) and g.free (the
-- slots left: limit - running); and, with a rate, g.tau (us between tokens), g.burst, g.base (the GCRA's
-- theoretical arrival time, never before now); g.ktrack, g.kown and g.kflags, those fields
-- as read (pop_keyed turns the first two into whether the keys' leases are kept and
-- whether some key has its own limits: key_flags), g.kdef the keys' default limits
-- (field key). An unlimited queue costs one HMGET of a missing
-- key, or none when the caller read the fields already (l: limit_fields's reply).
-- Concurrency counts unexpired leases (ZCOUNT of deadlines after now), never a counter: a
-- dead worker's slots come back at its lease deadline, with nothing to repair or drift.
-- Rate is GCRA (the generic cell rate algorithm): one stored time, tat; a start is allowed
-- while tat - burst*tau <= now, and each moves tat on by tau. That is a token bucket of
-- size burst refilled one token per tau, exact, with no counter to drift and no window
-- edge to double up on: at most rate + burst - 1 starts in any window of one period.
local function limit_room(limit, active, n, now, now_us, l)
  l = l or limit_fields(limit)
  -- ktrack and kown as read: pop_keyed makes them booleans (key_flags).
  -- Every field the claim may set is named here: a table built with room for them is
  -- not rebuilt (rehashed) when they are set.
  local g = {n = n, conc = tonumber(l[1]) or 0, ktrack = l[6], kdef = l[7], kown = l[8], kflags = l[9],
    running = nil, free = nil, bound = nil, why = nil, tau = nil, burst = nil, base = nil, kread = nil}
  if g.conc > 0 then
    -- ZCARD counts the leases that expired too (a dead worker's, until reaped): when even
    -- that leaves room for the whole claim, the limit cannot cut it, and the exact count
    -- (a ZCOUNT: it reads every lease's deadline, four times the cost) is not needed;
    -- g.running is then that upper bound, g.free a lower bound (limit_reply, wake_freed).
    g.running, g.bound = redis.call('ZCARD', active), true
    if g.conc - g.running < n then
      g.running, g.bound = redis.call('ZCOUNT', active, '(' .. now, '+inf'), nil
    end
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
    redis.call('HSET', limit, 'tat', string.format('%d', g.base + m * g.tau))
  end
end

-- limit_reply is the limit part of a claim's reply: {concurrency, why, wait_us, free}. free
-- is, with a concurrency limit, how many slots this claim left free (m: jobs it claimed;
-- else 0; far from the limit, leases expired but not reaped yet count as taken: g.bound). why is g.why when a limit cut the claim short and jobs are left waiting (in
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
-- ZCARD of a missing key (due_keys).
-- Returns the claimed jobs, one array per job: the job's hash as a flat field/value array
-- (HGETALL, read before this claim's writes) followed by four values: its ID, its new
-- attempt, k, and its start (us: now, or under a rate its token's instant, at most
-- rate_ahead from now: the worker starts it then; started_at is the same in ms); the limit part of the reply (limit_reply); and the
-- queue's concurrency limit as read (0: none; nil when nothing was claimed for n = 0 or a
-- paused queue) and, under one, the unexpired leases after the claim and whether that
-- count is only an upper bound (g.bound, see limit_room), for wake_freed.
-- Nothing while the queue is
-- paused. The claim also sets state, started_at (now) and worker, which the caller knows.
-- Each claimed job gets a 'started' event in the call's events buffer ev (see event_buf;
-- the caller writes it, after the RPOPs: the first writes). The rates' tokens are taken
-- after the RPOPs too, one per job claimed (a stale ID dropped takes none). l: the
-- limits' fields as the caller read them in this call (limit_fields), or nil.
local function claim_jobs(ready, active, paused, limit, prefix, n, lease_ms, worker, token, now, now_us, ev, l)
  if n <= 0 or redis.call('EXISTS', paused) == 1 then return {}, {0, 0, 0, 0} end
  local g = limit_room(limit, active, n, now, now_us, l)
  local base = key_base(prefix)
  local ring = base .. 'keys'
  local ids, keyof, recs, due = {}, {}, nil, nil
  if g.n > 0 then
    due = due_keys(ring, now_us, g.n)
    if due and due.n > 0 then
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
    if #ids == 0 and due and due.n > 0 and not recs then
      recs = pop_keyed(g, limit, active, base, due, g.n, now, now_us, ids, keyof)
    end
  end
  local deadline = now + lease_ms
  -- Numbers given to redis.call or joined into a string are formatted with %.14g, a
  -- slow printf of a double, each time: the values shared by the claim's jobs are
  -- formatted once, as integers, and the attempts once per value met.
  local deadline_s, now_s, attempts = string.format('%d', deadline), string.format('%d', now), {}
  -- etyp, eatt: the type and attempt of the started event added last (ev: none yet), for
  -- event_again: nothing else adds events in this loop.
  -- m: the jobs claimed so far (out's length; leased has twice as many values): counted,
  -- not taken with #, which is a search of the table's array each time.
  local out, leased, etyp, eatt, m = {}, {}, ev, nil, 0
  local next_ms = (now + 1) * 1000 -- the first microsecond after now's millisecond
  -- The last start's millisecond formatted (at_ms, at_s): under a fast rate most jobs
  -- that start after now's millisecond share one.
  local at_ms, at_s = now, now_s
  -- The queue rate's token instants (rate_start), from locals: this loop runs per job.
  local qtau, qbase, qburst = g.tau, g.base, g.burst
  for k, id in ipairs(ids) do
    local key = prefix .. id
    -- One read, one write per job: the hash is read whole (the worker needs it) and the
    -- attempt is counted from it, instead of EXISTS + HINCRBY + HGETALL.
    local job = redis.call('HGETALL', key)
    local attempt, state, typ = 1, nil, nil
    local nj = #job
    for i = 1, nj, 2 do
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
      local start = now_us
      if qtau then
        -- rate_start's, inline: this runs per job.
        local t = qbase + (m + 1 - qburst) * qtau
        if t > now_us then start = t end
      end
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
      -- Formatted only when its millisecond is not now's (start is never before now_us):
      -- under a fast rate, most jobs of a claim start a few microseconds apart, within
      -- now's millisecond.
      local started = now_s
      if start >= next_ms then
        local ms = math.floor(start / 1000)
        if ms ~= at_ms then at_ms, at_s = ms, string.format('%d', ms) end
        started = at_s
      end
      local att = attempts[attempt]
      if not att then att = string.format('%d', attempt); attempts[attempt] = att end
      redis.call('HSET', key, 'attempt', att, 'state', 'active', 'started_at', started,
        'worker', worker, 'lease', string.format('%s:%d', token, k))
      if not (typ == etyp and att == eatt and event_again(ev, id)) then
        event(ev, 'started', id, typ, att, worker, '')
        etyp, eatt = typ, att
      end
      job[nj + 1] = id
      job[nj + 2] = attempt
      job[nj + 3] = k
      job[nj + 4] = start
      m = m + 1
      out[m] = job
      leased[2 * m - 1] = deadline_s
      leased[2 * m] = id
      if r then
        r.m = r.m + 1
        if r.ids then r.ids[r.m] = id end
      end
    end
  end
  if m > 0 then redis.call('ZADD', active, unpack(leased)) end
  if recs then key_claimed(ring, recs, deadline, now, now_us, due.now_s) end
  limit_take(limit, g, m)
  if #ids < g.n then
    g.why = nil -- ready and the due keys ran dry before the queue's limit was met
    -- Every key left is held back by its own limits: say until when.
    if redis.call('LLEN', ready) == 0 and redis.call('EXISTS', ring) == 1 then g.why = 3 end
  end
  -- Unexpired leases after the claim, with a concurrency limit: those it counted (after
  -- any acks of the same call) and the jobs it leased.
  local running
  if g.running and g.conc > 0 then running = g.running + m end
  return out, limit_reply(g, ready, active, ring, m, now, now_us), g.conc, running, g.bound
end

-- wake_freed wakes workers waiting on the queue's concurrency limit after a script freed
-- slots (ack, fail, hand back with a delay, reap to dead): one 'r' token per slot freed
-- and still free, only when the queue was full before (else no claim was refused, and no
-- worker waits on it) and jobs are ready to take the slot, so a freed slot wakes one
-- waiting worker, not a herd, and a limit that never binds pushes nothing. limit:
-- jobs:{q}:limit; freed: slots this script freed; taken: jobs it claimed after freeing
-- them (ackclaim); now in ms. Jobs wait in ready or under a key (jobs:{q}:keys, named
-- from limit's name). Nothing for a queue without a concurrency limit (one HGET, or none
-- when the caller read the limit already: conc, 0 for none; nil: read it here). running:
-- the unexpired leases now, when a claim of the same call counted them (claim_jobs's
-- fourth reply), else nil: counted here; bound (its fifth) true when running is only an
-- upper bound of them (it counts expired leases too, see limit_room).
local function wake_freed(limit, active, ready, wakes, freed, taken, now, conc, running, bound)
  if freed <= 0 then return end
  if conc == nil then conc = tonumber(redis.call('HGET', limit, 'concurrency')) end
  if not conc or conc <= 0 then return end
  local free = conc - (running or redis.call('ZCOUNT', active, '(' .. now, '+inf'))
  if free + taken - freed > 0 then return end
  if bound then
    -- The claim's count may include expired leases: the exact one decides (rare: the
    -- claim found room for all it asked, and the slots freed may be all that is free).
    free = conc - redis.call('ZCOUNT', active, '(' .. now, '+inf')
    if free + taken - freed > 0 then return end
  end
  if redis.call('LLEN', ready) == 0 and redis.call('EXISTS', string.sub(limit, 1, -6) .. 'keys') == 0 then return end
  wake(wakes, math.min(freed, free), 'r')
end

-- Hand-offs: an idle worker's pickup in one round trip. A worker about to wait on a queue
-- it found empty registers as a waiter (its claim does: waiter_claimed), and an enqueue
-- that finds ready empty claims its job for one live waiter in the same script and pushes
-- it on the waiter's hand list, which the worker's BLPOP includes (enqueue.lua). All keys in
-- the queue's slot, named from base "jobs:{q}:": waiters (ZSET: member
-- "<lease_ms>\t<token prefix>\t<worker>", score its expiry in ms) and hand:<worker> (LIST
-- of handed jobs, each encoded by hand_entry; enqueue.lua's one-job path hands them).

-- hand_entry encodes a claimed job (job's first n values, as a claim reply's job array:
-- its hash's fields and values as read before the claim, then ID, attempt, k, start;
-- every value a string, numbers formatted with %d by the caller) for a hand list, after the lease token's prefix
-- and now_us (the claim reply's now, a string too): each value as "<length>:<value>", so
-- a payload may hold any byte. A length up to 64 (every field but a payload over 4 KiB)
-- comes from the table below and the rest from string.format's %d, and the whole is joined
-- once: a number concatenated (#v .. ':') is formatted as %.14g (sprintf), and those
-- formats were the costliest part of a hand-off's script (under callgrind, 254k Redis
-- instructions per hand-off with them, 211k with this).
local function hand_entry(token, now_us, job, n_job)
  local lens = {[0] = '0:', '1:', '2:', '3:', '4:', '5:', '6:', '7:', '8:', '9:', '10:', '11:', '12:',
    '13:', '14:', '15:', '16:', '17:', '18:', '19:', '20:', '21:', '22:', '23:', '24:', '25:', '26:',
    '27:', '28:', '29:', '30:', '31:', '32:', '33:', '34:', '35:', '36:', '37:', '38:', '39:', '40:',
    '41:', '42:', '43:', '44:', '45:', '46:', '47:', '48:', '49:', '50:', '51:', '52:', '53:', '54:',
    '55:', '56:', '57:', '58:', '59:', '60:', '61:', '62:', '63:', '64:'}
  local parts = {lens[#token] or string.format('%d:', #token), token, lens[#now_us], now_us}
  local n = 4
  for i = 1, n_job do
    local v = job[i]
    parts[n + 1] = lens[#v] or string.format('%d:', #v)
    parts[n + 2] = v
    n = n + 2
  end
  return table.concat(parts, '', 1, n)
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
