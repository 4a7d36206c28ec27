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
-- ARGV[1]  job key prefix       "jobs:{q}:job:"
-- ARGV[2]  limit                most jobs deleted in this call
-- ARGV[3]  state                the state purged: a hash in another state (its ID was
--                               reused after a stale entry's hash expired) is left alone
-- ARGV[4]  max score            ZSET only: only entries scored at most this are taken (the
--                               highest score when the purge began, so jobs that enter the
--                               set meanwhile, e.g. a poison job dying again, are spared
--                               and the purge ends); "+inf" for no bound. Ignored for ready.
-- ARGV[5]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- Returns  the number of jobs deleted.
-- Clock    none.
-- Invariant only the given index and its jobs' hashes (and unique keys) are touched; active
--          jobs have no purge: cancel them instead, so no worker loses a job under it.

local index, prefix, limit, state, max_score = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local ids
if redis.call('TYPE', index)['ok'] == 'list' then
  ids = redis.call('LRANGE', index, -limit, -1)
  if #ids > 0 then redis.call('LTRIM', index, 0, -#ids - 1) end
else
  ids = redis.call('ZRANGEBYSCORE', index, '-inf', max_score, 'LIMIT', 0, limit)
  if #ids > 0 then redis.call('ZREM', index, unpack(ids)) end
end
for _, id in ipairs(ids) do
  if redis.call('HGET', prefix .. id, 'state') == state then
    release_unique(prefix .. id, id)
    redis.call('DEL', prefix .. id)
  end
end
if #ids > 0 then
  local ev = event_buf(KEYS[2], tonumber(ARGV[5]))
  event(ev, 'purged', '', '', 0, '', 'deleted ' .. #ids .. ' ' .. state .. ' jobs')
  write_events(ev)
end
return #ids
