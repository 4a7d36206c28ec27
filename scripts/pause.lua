-- pause: pause or resume a queue (`jobs pause`, `jobs resume`). No job moves, but the
-- change and its event must be one step, so that the events stream says exactly when the
-- queue was paused and resumed, and a repeated pause or resume writes nothing.
--
-- KEYS[1]  jobs:{q}:paused      STRING present while the queue is paused (claims take nothing)
-- KEYS[2]  jobs:{q}:wake        LIST  one 'r' token on resume, so an idle worker claims at once
-- KEYS[3]  jobs:{q}:events      STREAM one 'paused' or 'resumed' entry per change
-- ARGV[1]  pause                "1": pause; "": resume
-- ARGV[2]  events_max           the events stream keeps about this many entries, each one
--                               call's events (<= 0: none)
-- Returns  1 if the queue changed, 0 if it was already paused (or running).
-- Clock    none (the event's ID is Redis's clock).
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
if redis.call('DEL', paused) == 0 then return 0 end
wake(wakes, 1, 'r')
event(ev, 'resumed', '', '', 0, '', '')
write_events(ev)
return 1
