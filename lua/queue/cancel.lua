--[[
cancel: remove a job by id in whatever state it is (pending, parked, in flight, dead;
a copy a change of the shard count has not settled counts as what it was copied as).
A worker running it keeps running, but its ack, nack or extension then finds
no record and changes nothing.

Why atomic: the record and the set memberships must go together, or a claim
could pick up a job whose record was just deleted.

Uses lua/lib/record.lua, chunk.lua, records.lua, due-index.lua and pause.lua.

KEYS[1] due           ZSET
KEYS[2] dueBuckets    prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight      ZSET
KEYS[4] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[5] records       HASH  the record groups' level, split pointer and count
KEYS[6] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[7] dead          ZSET
KEYS[8] errors        HASH
KEYS[9] paused        HASH  (not read here)
KEYS[10] parked       prefix of the parked ZSETs, one per type (no such key)

ARGV[1] job id
ARGV[2] layout epoch the caller acts on (as schedule.lua's ARGV[9])

Returns 1 pending (in its due bucket or parked), 2 in flight, 3 dead: the
state the job was removed from; 0 not found; -1 the shard's layout epoch is
later than ARGV[2]: nothing removed (the caller reads the layout again).
]]
if tonumber(redis.call('HGET', KEYS[5], 'e') or '0') > tonumber(ARGV[2]) then return -1 end
local due, dueBuckets, inflight, dead, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[7], KEYS[8]
dueUse(due, dueBuckets)
recUse(KEYS[4], KEYS[5], KEYS[6])
pauseUse(KEYS[9], KEYS[10])
local id = ARGV[1]
local rec, key = recGet(id)
if not rec then return 0 end
local state = 1
if redis.call('ZREM', inflight, id) == 1 then state = 2
elseif redis.call('ZREM', dead, id) == 1 then state = 3
elseif movingDead(id) then redis.call('ZREM', movingKey(), id); state = 3
else pendingRemove(rec, id) end
recDelete(key, id)
redis.call('HDEL', errors, id)
recDone()
return state
