--[[
inspect: read one job's whole state as a consistent snapshot (read-only).

A job with a record is in exactly one of: the due index (pending), its
type's parked ZSET (pending, type paused: lua/lib/pause.lua), in flight,
dead, or (during a change of the shard count on a Redis Cluster) the
shard's unsettled copies, read as pending or dead as copied. A pending job's
due time is the one in its record (lua/lib/due-index.lua files it by that
time), so the buckets need not be read. Uses
lua/lib/record.lua, records.lua, due-index.lua and pause.lua.

KEYS[1] inflight      ZSET
KEYS[2] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[3] records       HASH  the record groups' level, split pointer and count
KEYS[4] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[5] dead          ZSET
KEYS[6] errors        HASH
KEYS[7] paused        HASH  (not read here)
KEYS[8] parked        prefix of the parked ZSETs, one per type (no such key)
ARGV[1] job id

Returns { record or false, due time if pending or false, lease deadline or
          false, death time or false, last error or false, 1 if parked or 0 }
]]
local id = ARGV[1]
recUse(KEYS[2], KEYS[3], KEYS[4])
pauseUse(KEYS[7], KEYS[8])
local rec = recGet(id)
local lease = redis.call('ZSCORE', KEYS[1], id)
local died = redis.call('ZSCORE', KEYS[5], id)
if rec and not lease and not died then
  -- A dead job's copy not yet settled by a change of the shard count is dead.
  local moved = redis.call('ZSCORE', movingKey(), id)
  if moved and tonumber(moved) > 0 then died = moved end
end
local due, parked = false, 0
if rec and not lease and not died then
  due = recordDue(rec) or false
  local typ = recordType(rec)
  if typ and redis.call('ZSCORE', parkedKey(typ), id) then parked = 1 end
end
return { rec, due, lease, died, redis.call('HGET', KEYS[6], id), parked }
