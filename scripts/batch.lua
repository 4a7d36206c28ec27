-- batch: creates a batch, adds children to it, or seals it (jobs enqueue --batch,
-- Client.NewBatch, Client.BatchAdd). A batch is a HASH of counts, state and callbacks
-- and a SET of its pending children, in the slot of its queue; its children may be in
-- any queue. The children are added to the pending set here before they are enqueued,
-- so none can end before the batch counts it; the batch is sealed once all are enqueued,
-- and only a sealed batch completes.
--
-- KEYS[1]  jobs:{q}:batch:<id>          HASH state (creating, running, succeeded,
--                                       completed), created_at, finished_at, total, done,
--                                       dead, cb:<kind>:type, cb:<kind>:payload,
--                                       fired:<kind> (the callback's job ID)
-- KEYS[2]  jobs:{q}:batch:<id>:pending  SET  the children not ended ("queue\tid")
-- KEYS[3]  jobs:{q}:events              STREAM enqueued events of callbacks fired at seal
-- ARGV[1]  job key prefix       "jobs:{q}:job:" (callback jobs are written in this queue)
-- ARGV[2]  batch ID
-- ARGV[3]  mode                 "create" (a new batch, or the same batch again while it is
--                               creating: a rerun after a crash), "add" (to a batch not
--                               ended: a running child adds jobs to its own batch),
--                               "seal" (creating -> running; ends it at once if no child
--                               is pending)
-- ARGV[4]  retention_ms         an ended batch is kept this long
-- ARGV[5]  events_max           the events stream keeps about this many entries (<= 0:
--                               none)
-- ARGV[6]  n                    callbacks that follow (create only)
-- ARGV[7..6+3n]                 kind (complete, success, death), type, payload ("" = the
--                               batch's counts as JSON)
-- ARGV[7+3n..]                  children to add, "queue\tid"
-- Returns  the batch's state after the call, or "exists:<state>" (create of a batch that
--          is past creating), "missing" (add or seal of no batch), "ended:<state>" (add to
--          an ended batch: nothing added).
-- Clock    Redis TIME.
-- Invariant total counts each child once (beside a successful SADD); done and dead count
--          each child once (beside a successful SREM, the lib's batch_settled); each
--          callback is enqueued at most once (HSETNX of fired:<kind>).

local bkey, pending = KEYS[1], KEYS[2]
local prefix, bid, mode = ARGV[1], ARGV[2], ARGV[3]
local retention = tonumber(ARGV[4])
local ev = event_buf(KEYS[3], tonumber(ARGV[5]))
local ncb = tonumber(ARGV[6])
local state = redis.call('HGET', bkey, 'state')
local now = now_ms()
if mode == 'create' then
  if state and state ~= 'creating' then return 'exists:' .. state end
  if not state then
    redis.call('HSET', bkey, 'state', 'creating', 'created_at', now, 'total', 0, 'done', 0, 'dead', 0)
    for c = 0, ncb - 1 do
      local at = 7 + 3 * c
      redis.call('HSET', bkey, 'cb:' .. ARGV[at] .. ':type', ARGV[at + 1], 'cb:' .. ARGV[at] .. ':payload',
        ARGV[at + 2])
    end
    state = 'creating'
  end
elseif not state then
  return 'missing'
elseif mode == 'add' and state ~= 'creating' and state ~= 'running' then
  return 'ended:' .. state
end
local added = 0
for i = 7 + 3 * ncb, #ARGV do
  added = added + redis.call('SADD', pending, ARGV[i])
end
if added > 0 then redis.call('HINCRBY', bkey, 'total', added) end
if mode == 'seal' and state == 'creating' then
  redis.call('HSET', bkey, 'state', 'running')
  batch_check(string.sub(prefix, 1, -5), bid, now, ev, retention)
  write_events(ev)
  state = redis.call('HGET', bkey, 'state')
end
return state
