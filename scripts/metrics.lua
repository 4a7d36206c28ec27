-- metrics: add what one worker ran in the last seconds to its queue's metrics history
-- (per minute and per hour: processed, failed, run-time and wait-time histograms by job
-- type). It moves no job: these are statistics, flushed best effort (a worker that dies
-- loses what it had not flushed), never state.
--
-- KEYS[1..n] jobs:{q}:metrics:m:<unix minute>, jobs:{q}:metrics:h:<unix hour>  HASH
--            (all of one queue: one slot)
-- ARGV[1..n] expire_at_ms of KEYS[i]: the end of its minute or hour + its retention
--            (48 hours for minutes, 30 days for hours)
-- ARGV[n+1..] for each key in KEYS' order: c, then c pairs field, increment. Fields:
--            processed:<type>, failed:<type>, run:<k>:<type>, wait:<k>:<type> (k: the
--            histogram bucket, proto.HistBucket)
-- Returns  how many keys it wrote; a key already past its retention is skipped.
-- Clock    Redis TIME, for the TTL left; the minute of each count is the worker's, taken
--          from the claim's Redis time plus the handler's duration.
-- Invariant each key has a TTL once written (PEXPIRE in the same script), so the history
--          never grows past its retention.

local now = now_ms()
local n, i, wrote = #KEYS, #KEYS + 1, 0
for k = 1, n do
  local c = tonumber(ARGV[i])
  local ttl = tonumber(ARGV[k]) - now
  if ttl > 0 and c > 0 then
    for j = i + 1, i + 2 * c, 2 do
      redis.call('HINCRBY', KEYS[k], ARGV[j], ARGV[j + 1])
    end
    redis.call('PEXPIRE', KEYS[k], ttl)
    wrote = wrote + 1
  end
  i = i + 1 + 2 * c
end
return wrote
