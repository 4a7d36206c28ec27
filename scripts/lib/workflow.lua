-- The lib's dead jobs and workflows: dependencies, batches, callbacks (see base.lua).

-- dead_core moves a job to the dead set (it is already out of every other set), releases
-- its unique key, expires its hash after retention_ms and trims the dead set. ended: the
-- job's ended lease (ended_lease) when the holder of its lease ends the attempt here, or
-- nil (the lease is deleted). Returns the job's dependents and batch fields (see follow):
-- one HMGET serves the unique key and the workflow links, so a plain job pays nothing more;
-- and the dead jobs the trim dropped that retried dependents wait on (trim), or nil.
local function dead_core(dead, job_prefix, id, now, retention_ms, dead_max, ended)
  local key = job_prefix .. id
  local u = redis.call('HMGET', key, 'unique_key', 'unique_keep', 'dependents', 'batch', 'after')
  release_held(u[1], u[2], id)
  if ended then
    redis.call('HSET', key, 'state', 'dead', 'finished_at', now, 'lease', ended)
  else
    redis.call('HSET', key, 'state', 'dead', 'finished_at', now)
    redis.call('HDEL', key, 'lease')
  end
  -- A dependent that dies waiting keeps its pending set as long as its hash, and the ends
  -- of its dependencies go on removing their members (resolve_dep's SREM comes before its
  -- state check): Client.Dependencies shows which it no longer waited for. A retry
  -- (retry.lua) refills it from the after field.
  if u[5] then redis.call('PEXPIRE', string.sub(job_prefix, 1, -5) .. 'deps:' .. id, retention_ms) end
  redis.call('PEXPIRE', key, retention_ms)
  redis.call('ZADD', dead, now, id)
  local trimmed = trim(dead, job_prefix, now, retention_ms, dead_max, 'dead')
  return u[3], u[4], trimmed
end

-- queue_of is the queue name in a key prefix of that queue ("jobs:{q}:job:" -> "q"): the
-- prefix has no brace (Config.Prefix refuses them), so the first '{' opens the tag.
local function queue_of(prefix)
  local a = string.find(prefix, '{', 1, true)
  local b = string.find(prefix, '}:', a, true)
  return string.sub(prefix, a + 1, b - 1)
end

-- make_callback enqueues a batch's callback job (ready, due now) in the batch's queue
-- (base = "jobs:{q}:"): ID <batch>.<kind>, the type and payload the batch was given
-- (payload "" = the batch's counts as JSON). Called once per kind: the caller's HSETNX of
-- the batch's fired:<kind> field is the guard.
local function make_callback(base, bkey, bid, kind, now, ev)
  local cb = redis.call('HMGET', bkey, 'cb:' .. kind .. ':type', 'cb:' .. kind .. ':payload', 'total', 'done', 'dead')
  if not cb[1] then return end
  local id = bid .. '.' .. kind
  local payload = cb[2] or ''
  if payload == '' then
    -- By hand, not cjson.encode of a table: its key order is the table's hash order.
    payload = string.format('{"batch":%s,"queue":%s,"event":"%s","total":%d,"done":%d,"dead":%d}',
      cjson.encode(bid), cjson.encode(queue_of(base)), kind, tonumber(cb[3]) or 0, tonumber(cb[4]) or 0,
      tonumber(cb[5]) or 0)
  end
  local key = base .. 'job:' .. id
  if redis.call('EXISTS', key) == 1 then return end
  -- max_retry and timeout_ms left out: the defaults (see enqueue.lua).
  redis.call('HSET', key, 'type', cb[1], 'payload', payload, 'created_at', now, 'state', 'ready', 'batch_of', bid)
  redis.call('HSET', bkey, 'fired:' .. kind, id)
  redis.call('LPUSH', base .. 'ready', id)
  wake(base .. 'wake', 1, 'r')
  if ev then event(ev, 'enqueued', id, cb[1], 0, '', '') end
end

-- batch_check ends the batch bid of queue base ("jobs:{q}:") when it is sealed (state
-- running) and no child is pending: state succeeded (no child died) or completed, kept
-- retention_ms more, and its complete callback, and its success callback when no child
-- died, enqueued, each once (HSETNX of fired:<kind> is the guard).
local function batch_check(base, bid, now, ev, retention_ms)
  local bkey = base .. 'batch:' .. bid
  if redis.call('HGET', bkey, 'state') ~= 'running' or redis.call('EXISTS', bkey .. ':pending') == 1 then return end
  local dead = tonumber(redis.call('HGET', bkey, 'dead')) or 0
  local final = 'succeeded'
  if dead > 0 then final = 'completed' end
  redis.call('HSET', bkey, 'state', final, 'finished_at', now)
  redis.call('PEXPIRE', bkey, retention_ms)
  if redis.call('HSETNX', bkey, 'fired:complete', '') == 1 then make_callback(base, bkey, bid, 'complete', now, ev) end
  if dead == 0 and redis.call('HSETNX', bkey, 'fired:success', '') == 1 then
    make_callback(base, bkey, bid, 'success', now, ev)
  end
end

-- batch_settled records in the batch bid of queue base ("jobs:{q}:") that its members
-- (children "queue\tid", one SREM for them all) ended with outcome ('done' or 'dead').
-- Exactly once per member:
-- the SREM from the batch's pending set is the guard, so a resent ack, a repeated outbox
-- delivery or a later operator retry of the child counts nothing twice (done and dead are
-- counted only beside a successful SREM, in the same script: they cannot drift). Fires the
-- death callback at the first death, and the complete and success callbacks when the last
-- pending child ends after the batch was sealed; each once (HSETNX of fired).
local function batch_settled(base, bid, members, outcome, now, ev, retention_ms)
  local bkey = base .. 'batch:' .. bid
  local removed = redis.call('SREM', bkey .. ':pending', unpack(members))
  if removed == 0 then return end
  local n = redis.call('HINCRBY', bkey, outcome, removed)
  if outcome == 'dead' and n == removed and redis.call('HSETNX', bkey, 'fired:death', '') == 1 then
    make_callback(base, bkey, bid, 'death', now, ev)
  end
  batch_check(base, bid, now, ev, retention_ms)
end

-- resolve_dep records in the waiting job tid of the queue of prefix that its dependency
-- src ("queue\tid") ended with outcome ('done' or 'dead'; a purged or unknown dependency
-- is 'dead'; 'cycle': src waits on tid, which dies whatever its policy). The SREM of src from tid's pending set (jobs:{q}:deps:<id>) is the guard:
-- each edge resolves once however often it is delivered. The job leaves waiting when the
-- set is empty (to ready), or at once to dead when src died and its policy (dep_policy)
-- is not 'run'. Returns follow's work when it sent tid to dead (the caller follows it in
-- turn): {tid, 'dead', dependents, batch}, then the jobs its dead set's trim dropped that
-- had dependents (dead_core); else nil.
local function resolve_dep(prefix, tid, src, outcome, now, ev, dead_retention, dead_max)
  local base = string.sub(prefix, 1, -5)
  if redis.call('SREM', base .. 'deps:' .. tid, src) == 0 then return nil end
  local key = prefix .. tid
  local d = redis.call('HMGET', key, 'state', 'dep_policy', 'type', 'limit_key')
  if d[1] ~= 'waiting' then return nil end
  if outcome == 'cycle' or (outcome ~= 'done' and d[2] ~= 'run') then
    local err = 'dependency ' .. string.gsub(src, '\t', '/') .. ' died'
    if outcome == 'cycle' then
      err = 'dependency cycle: ' .. string.gsub(src, '\t', '/') .. ' waits on this job'
    end
    redis.call('ZREM', base .. 'waiting', tid)
    redis.call('HSET', key, 'last_error', err)
    local dd, db, trimmed = dead_core(base .. 'dead', prefix, tid, now, dead_retention, dead_max)
    if ev then event(ev, 'dead', tid, d[3], 0, '', err) end
    local work = {{tid, 'dead', dd, db}}
    for _, w in ipairs(trimmed or {}) do work[#work + 1] = w end
    return work
  end
  if redis.call('EXISTS', base .. 'deps:' .. tid) == 0 then
    redis.call('ZREM', base .. 'waiting', tid)
    redis.call('HSET', key, 'state', 'ready')
    push_ready(base .. 'ready', prefix, tid, d[4], false, now)
    wake(base .. 'wake', 1, 'r')
    if ev then event(ev, 'enqueued', tid, d[3], 0, '', '') end
  end
  return nil
end

-- follow resolves what waits on jobs that just ended (done or dead) in the queue of
-- prefix ("jobs:{q}:job:"): their dependents (the SET jobs:{q}:dependents:<id>, flagged by
-- the hash's dependents field) and their batch (the hash's batch field, "queue\tbatch").
-- work: a list of {id, outcome, dependents flag, batch field}. A target in this queue is
-- resolved here, in the same script; one in another queue (another cluster slot) gets an
-- entry in this queue's outbox (jobs:{q}:outbox, field "j\tqueue\tid\tsource" or
-- "b\tqueue\tbatch\tsource", value the outcome), which a worker delivers with
-- resolve.lua and then deletes; an 'o' wake token asks one to. Resolving a dependent:
-- the SREM of "queue\tid" from its pending set (jobs:{q}:deps:<id>) is the guard, so each
-- edge resolves once however often it is delivered; the dependent leaves waiting when the
-- set is empty (to ready), or at once to dead when a dependency died and its policy
-- (dep_policy) is not 'run'; a dependent that dies this way is followed in turn.
local function follow(prefix, work, now, ev, dead_retention, dead_max)
  local base = string.sub(prefix, 1, -5)
  local q = queue_of(prefix)
  local outbox = false
  local settle, order = {}, {}
  local i = 1
  while i <= #work do
    local w = work[i]
    i = i + 1
    local src = q .. '\t' .. w[1]
    if w[3] then
      local set = base .. 'dependents:' .. w[1]
      for _, m in ipairs(redis.call('SMEMBERS', set)) do
        local t = string.find(m, '\t', 1, true)
        local tq, tid = string.sub(m, 1, t - 1), string.sub(m, t + 1)
        if tq ~= q then
          redis.call('HSET', base .. 'outbox', 'j\t' .. m .. '\t' .. w[1], w[2])
          outbox = true
        else
          local died = resolve_dep(prefix, tid, src, w[2], now, ev, dead_retention, dead_max)
          for _, d in ipairs(died or {}) do work[#work + 1] = d end
        end
      end
      redis.call('DEL', set)
    end
    if w[4] then
      local t = string.find(w[4], '\t', 1, true)
      local bq, bid = string.sub(w[4], 1, t - 1), string.sub(w[4], t + 1)
      if bq ~= q then
        redis.call('HSET', base .. 'outbox', 'b\t' .. w[4] .. '\t' .. w[1], w[2])
        outbox = true
      else
        -- Settled together after the loop: one SREM and one count per batch and outcome,
        -- not per child (a worker acks many children of one batch per call).
        local g = w[2] .. '\t' .. bid
        if not settle[g] then
          settle[g] = {bid = bid, outcome = w[2]}
          order[#order + 1] = g
        end
        local m = settle[g]
        m[#m + 1] = src
      end
    end
  end
  for _, g in ipairs(order) do
    batch_settled(base, settle[g].bid, settle[g], settle[g].outcome, now, ev, dead_retention)
  end
  if outbox then wake(base .. 'wake', 1, 'o') end
end

-- to_dead moves a job to the dead set (dead_core) and resolves what waited on it
-- (follow): its dependents and its batch learn it died, and so do the dependents of the
-- dead jobs the dead set's trim dropped. ev: the call's events buffer, for the dependents
-- it moves (nil: none written).
local function to_dead(dead, job_prefix, id, now, retention_ms, dead_max, ended, ev)
  local deps, batch, trimmed = dead_core(dead, job_prefix, id, now, retention_ms, dead_max, ended)
  local work = trimmed or {}
  if deps or batch then table.insert(work, 1, {id, 'dead', deps, batch}) end
  if #work > 0 then follow(job_prefix, work, now, ev, retention_ms, dead_max) end
end
