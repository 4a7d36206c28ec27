-- audit: appends one operator action to the audit log (the dashboard's /audit page) and
-- caps the log, in one step, so the log never outgrows its cap. No job moves.
--
-- KEYS[1]  jobs:{audit}:log      STREAM one entry per action: fields who, action, queue,
--                               target, count, detail
-- ARGV[1]  max entries          the stream keeps about this many (MAXLEN ~)
-- ARGV[2..7]                    who, action, queue, target, count, detail
-- Returns  the entry's ID (its time, Redis's clock).
-- Clock    Redis's, through the entry ID.
-- Invariant the stream holds at most about ARGV[1] entries after every call.

local id = redis.call('XADD', KEYS[1], '*', 'who', ARGV[2], 'action', ARGV[3], 'queue', ARGV[4],
  'target', ARGV[5], 'count', ARGV[6], 'detail', ARGV[7])
redis.call('XTRIM', KEYS[1], 'MAXLEN', '~', tonumber(ARGV[1]))
return id
