-- pause: pause or resume a queue (`jobs pause`, `jobs resume`), or end a handler's pause of
-- one limit key before its time (`jobs resume --key`, Client.ResumeKey). No job moves, but the
-- change and its event must be one step, so that the events stream says exactly when the
-- queue was paused and resumed, and a repeated pause or resume writes nothing.
--
-- KEYS[1]  jobs:{q}:paused      STRING present while the queue is paused (claims take nothing)
-- KEYS[2]  jobs:{q}:wake        LIST  one 'r' token on resume, so an idle worker claims at once
-- KEYS[3]  jobs:{q}:events      STREAM one 'paused' or 'resumed' entry per change
-- KEYS[4]  jobs:{q}:kpause:K    STRING present while a handler's pause of limit key K lasts
--                               (mode "k" only)
-- KEYS[5]  jobs:{q}:keys        ZSET  the ring of limit keys with jobs ready, score = when
--                               claims may serve the key next (us; mode "k" only)
-- ARGV[1]  pause                "1": pause; "": resume; "k": resume limit key ARGV[3]: its
--                               pause ends (DEL), the ring serves it now (ZADD XX LT), one
--                               'r' token when it has jobs ready, a 'resumed' event whose
--                               error is "limit key K"
-- ARGV[2]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- ARGV[3]  limit key            mode "k": the key K
-- Returns  1 if the queue (or key) changed, 0 if it was already paused (or running).
-- Clock    Redis TIME in mode "k" (the ring's now); else none (the event's ID is Redis's clock).
-- Invariant the paused key and the events stream agree: one entry per change. A resume's
--          first write is the DEL, so it goes through on a full Redis; a pause (SET) is
--          refused there, writing nothing.

local paused, wakes, events, maxlen = KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[2])
local ev = event_buf(events, maxlen)
if ARGV[1] == '1' then
  if not redis.call('SET', paused, '1', 'NX') then return 0 end
  event(ev, 'paused', '', '', 0, '', '')
  write_events(ev)
  return 1
end
if ARGV[1] == 'k' then
  if redis.call('DEL', KEYS[4]) == 0 then return 0 end
  -- now in us as an integer string: Lua's tostring keeps 14 digits of its 16.
  local us = string.format('%.0f', now_us())
  if redis.call('ZADD', KEYS[5], 'XX', 'LT', 'CH', us, ARGV[3]) == 1 then wake(wakes, 1, 'r') end
  event(ev, 'resumed', '', '', 0, '', 'limit key ' .. ARGV[3])
  write_events(ev)
  return 1
end
if redis.call('DEL', paused) == 0 then return 0 end
wake(wakes, 1, 'r')
event(ev, 'resumed', '', '', 0, '', '')
write_events(ev)
return 1
