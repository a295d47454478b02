--[[
cancel: remove a job by id in whatever state it is (pending, in flight, dead).
A worker running it keeps running, but its ack, nack or extension then finds
no record and changes nothing.

Why atomic: the record and the set memberships must go together, or a claim
could pick up a job whose record was just deleted.

Uses lua/lib/record.lua and lua/lib/due-index.lua.

KEYS[1] due         ZSET
KEYS[2] dueBuckets  prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight    ZSET
KEYS[4] jobs        HASH
KEYS[5] dead        ZSET
KEYS[6] errors      HASH

ARGV[1] job id

Returns 1 pending, 2 in flight, 3 dead: the state the job was removed from;
0 not found.
]]
local due, dueBuckets, inflight, jobs, dead, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
dueUse(due, dueBuckets)
local id = ARGV[1]
local rec = redis.call('HGET', jobs, id)
if not rec then return 0 end
local state = 1
if redis.call('ZREM', inflight, id) == 1 then state = 2
elseif redis.call('ZREM', dead, id) == 1 then state = 3
else dueRemove(recordDue(rec), id) end
redis.call('HDEL', jobs, id)
redis.call('HDEL', errors, id)
return state
