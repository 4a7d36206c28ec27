-- purge: deletes jobs of one state outright (`jobs purge`), up to a limit per call so a
-- large purge never blocks Redis for long; the caller repeats until it returns 0.
--
-- KEYS[1]  jobs:{q}:<state>      LIST (ready) or ZSET (scheduled, retry, done, dead): the
--                                state's index
-- KEYS[2]  jobs:{q}:events       STREAM one 'purged' entry per call that deleted jobs (no job
--                                ID; the error says how many of which state), so a reader
--                                waiting for a job (Client.Wait) looks whether it is gone.
--                                Per call, not per job: a purge is how an operator frees a
--                                full Redis, and must not fill it with events instead
-- KEYS[3]  jobs:{q}:keys         ZSET the ring of limit keys with jobs ready: a key whose
--                                list this call empties leaves it (see ARGV[8...])
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  limit                most jobs deleted from KEYS[1] in this call (0: none)
-- ARGV[3]  state                the state purged: a hash in another state (its ID was
--                               reused after a stale entry's hash expired) is left alone
-- ARGV[4]  max score            ZSET only: only entries scored at most this are taken (the
--                               highest score when the purge began, so jobs that enter the
--                               set meanwhile, e.g. a poison job dying again, are spared
--                               and the purge ends); "+inf" for no bound. Ignored for ready.
-- ARGV[5]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- ARGV[6]  dead_retention_ms    a dependent that dies because a purged job was its dependency
--                               (see follow in scripts/lib) expires this long after
-- ARGV[7]  dead_max             the dead set keeps at most this many jobs
-- ARGV[8...] K, n, K, n...      ready only: besides KEYS[1], up to n jobs of each limit key
--                               K, from its list jobs:{q}:kready:K (named from ARGV[1]),
--                               the end claimed next first (the caller keeps a call to
--                               about 1000 jobs in all)
-- Returns  the number of jobs deleted.
-- Clock    none.
-- Invariant only the given index (and keys' lists and the ring), its jobs' hashes (and
--          unique keys) are touched, and what waited on a purged job that had not ended: a purged job counts as dead
--          for its dependents and its batch (follow in scripts/lib; in this queue at once,
--          elsewhere through the outbox), so nothing waits forever on it; a purged
--          waiting job's pending set goes with it. Active jobs have no purge: cancel them
--          instead, so no worker loses a job under it. A key is in the ring exactly
--          while its list holds jobs (scripts/lib): one this call empties leaves it, one it
--          leaves jobs in keeps its place, so the claims go on serving them.

local index, prefix, limit, state, max_score = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local ids = {}
if limit > 0 then
  if redis.call('TYPE', index)['ok'] == 'list' then
    ids = redis.call('LRANGE', index, -limit, -1)
    if #ids > 0 then redis.call('LTRIM', index, 0, -#ids - 1) end
  else
    ids = redis.call('ZRANGEBYSCORE', index, '-inf', max_score, 'LIMIT', 0, limit)
    if #ids > 0 then redis.call('ZREM', index, unpack(ids)) end
  end
end
if state == 'ready' then
  local base = key_base(prefix)
  for i = 8, #ARGV - 1, 2 do
    local k, n = ARGV[i], tonumber(ARGV[i + 1])
    local list = base .. 'kready:' .. k
    if n and n > 0 then
      local got = redis.call('LRANGE', list, -n, -1)
      if #got > 0 then redis.call('LTRIM', list, 0, -#got - 1) end
      for _, id in ipairs(got) do ids[#ids + 1] = id end
    end
    if redis.call('LLEN', list) == 0 then redis.call('ZREM', KEYS[3], k) end
  end
end
local ev = event_buf(KEYS[2], tonumber(ARGV[5]))
local linked = nil
for _, id in ipairs(ids) do
  local job = redis.call('HMGET', prefix .. id, 'state', 'dependents', 'batch', 'after')
  if job[1] == state then
    release_unique(prefix .. id, id)
    redis.call('DEL', prefix .. id)
    if job[4] then redis.call('DEL', string.sub(prefix, 1, -5) .. 'deps:' .. id) end
    if job[2] or job[3] then
      linked = linked or {}
      linked[#linked + 1] = {id, 'dead', job[2], job[3]}
    end
  end
end
if #ids > 0 then
  event(ev, 'purged', '', '', 0, '', 'deleted ' .. #ids .. ' ' .. state .. ' jobs')
end
if linked then follow(prefix, linked, now_ms(), ev, tonumber(ARGV[6]), tonumber(ARGV[7])) end
write_events(ev)
return #ids
