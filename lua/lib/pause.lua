--[[
pause (a library, not a script: scripts/registry.ts puts it in front of every
script that reads the pause state or finds a pending job by id)

A queue shard's pause state and its parked jobs.

Layout (one queue shard, all under its hash tag):
  paused           HASH  '*' -> ms paused at (the whole queue), or a job type
                         -> ms paused at (that type only)
  parked .. type   ZSET  job id -> due time (ms): due jobs of a paused type
                         that a claim set aside, so they neither block the
                         other types' jobs behind them nor are met again by
                         every claim (a spin)

A parked job keeps its record where it was (its group or the jobs HASH) with
its due time; only its place moves, from the due buckets to its type's parked
ZSET. So the rule of lua/README.md becomes: a job with a record is in exactly
one of the due buckets, a parked ZSET, inflight, dead. Resume moves a type's
parked jobs back to the due buckets at their due times (lua/queue/resume.lua).

Parked keys are built here from a prefix the caller declares in KEYS (the key
itself never exists), as the due buckets' are: see lua/README.md, slot migration.
]]

local pausedKey, parkedPrefix

-- Every script that reaches the pause state or parked jobs calls this once.
local function pauseUse(paused, parked)
  pausedKey, parkedPrefix = paused, parked
end

local function parkedKey(typ)
  return parkedPrefix .. typ
end

-- The shard's pause state: whether the whole queue is paused, and a set of
-- paused types (type -> true). One HGETALL: the HASH holds a few fields.
local function pauseState()
  local flat = redis.call('HGETALL', pausedKey)
  local whole, types, any = false, {}, false
  for i = 1, #flat, 2 do
    if flat[i] == '*' then whole = true else types[flat[i]] = true; any = true end
  end
  return whole, types, any
end

-- Takes a pending job out of its type's parked ZSET; false when it is not
-- parked (or its record is unreadable, so its type is unknown).
local function parkedRemove(rec, id)
  local typ = rec and recordType(rec)
  if not typ then return false end
  return redis.call('ZREM', parkedKey(typ), id) == 1
end

-- Jobs a change of the shard count copied into this shard and has not
-- settled yet (queue/move-in.lua, queue/move-settle.lua; a Redis Cluster):
-- ZSET job id -> 0 (pending) or its time of death (ms). Neither claimed nor
-- counted; a write to the job here (schedule, cancel) takes it out, which
-- tells the mover the copy is no longer its own. No job type has a '~', so
-- no type's parked ZSET has this name.
local function movingKey()
  return parkedPrefix .. '~moving'
end

-- Whether the job is a dead job's unsettled copy: dead, to every write.
local function movingDead(id)
  local s = redis.call('ZSCORE', movingKey(), id)
  return s ~= false and tonumber(s) > 0
end

-- The mover that owns this shard's part of a change by copy (a Redis
-- Cluster): STRING, the generation of the latest mover to fence the shard
-- (queue/move-fence.lua). move-in, move-out and move-settle run only for that
-- generation, so a mover that stalled past its lock changes nothing once a
-- newer one has fenced the shard.
local function moverKey()
  return parkedPrefix .. '~mover'
end

-- Whether `gen` (a mover's generation, text) is the shard's owning mover.
local function moverIs(gen)
  return redis.call('GET', moverKey()) == gen
end

-- Jobs move-out.lua removed from this, their old shard: ZSET job id -> the
-- remover's generation. Proof that the old copy went because the mover took
-- it, not because it ran or was cancelled here: a mover settling copies left
-- by one that stopped files a copy only on this proof.
local function movedOutKey()
  return parkedPrefix .. '~moved'
end

-- Takes a pending job (neither in flight nor dead) out of wherever it waits:
-- its due bucket, or else its type's parked ZSET, or else the copies of a
-- shard count change. False when in none.
local function pendingRemove(rec, id)
  return dueRemove(recordDue(rec), id, recordPriority(rec)) or parkedRemove(rec, id) or redis.call('ZREM', movingKey(), id) == 1
end
