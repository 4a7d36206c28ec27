-- limit: sets or removes a queue's limits (`jobs limit set|rm`, Client.SetLimit,
-- Client.RemoveLimit). No job moves; the next claim of the queue applies the change (the
-- claims read the hash: see limit_room in lib.lua). One script so that the change, its
-- event and the notice to waiting workers are one step.
--
-- KEYS[1]  jobs:{q}:limit       HASH  concurrency (running jobs), rate (starts per
--                               period_ms), period_ms, burst, tat (the rate's GCRA state,
--                               us; written by claims)
-- KEYS[2]  jobs:{q}:events      STREAM one 'limit' entry per call that changed something,
--                               its error field the limits now ("" when none is left)
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
-- Returns  1 if the limits changed, 0 if they already were so (nothing written).
-- Clock    none.
-- Invariant a rate whose rate, period or burst changed starts afresh (tat removed: a full
--          burst is allowed at once); an unchanged one keeps its tat, so setting the
--          same limits again never lets a burst through. The hash is deleted when no
--          limit is left.

local limit, events = KEYS[1], KEYS[2]
local conc, rate, period, burst = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local old = redis.call('HMGET', limit, 'concurrency', 'rate', 'period_ms', 'burst')
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
if not changed then return 0 end
local now = redis.call('HMGET', limit, 'concurrency', 'rate', 'period_ms', 'burst')
local desc = {}
if now[1] then desc[#desc + 1] = 'concurrency ' .. now[1] end
if now[2] then desc[#desc + 1] = 'rate ' .. now[2] .. '/' .. now[3] .. 'ms burst ' .. now[4] end
if #desc == 0 then redis.call('DEL', limit) end
redis.call('PUBLISH', ARGV[5], ARGV[6])
local ev = event_buf(events, tonumber(ARGV[7]))
event(ev, 'limit', '', '', 0, '', table.concat(desc, ', '))
write_events(ev)
return 1
