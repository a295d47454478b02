--[[
cancel: remove a job by id in whatever state it is (pending, in flight, dead).
A worker running it keeps running, but its ack, nack or extension then finds
no record and changes nothing.

Why atomic: the record and the set memberships must go together, or a claim
could pick up a job whose record was just deleted.

KEYS[1] due       ZSET
KEYS[2] inflight  ZSET
KEYS[3] jobs      HASH
KEYS[4] dead      ZSET
KEYS[5] errors    HASH

ARGV[1] job id

Returns 1 pending, 2 in flight, 3 dead: the state the job was removed from;
0 not found.
]]
local due, inflight, jobs, dead, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local state = 0
if redis.call('ZREM', due, id) == 1 then state = 1
elseif redis.call('ZREM', inflight, id) == 1 then state = 2
elseif redis.call('ZREM', dead, id) == 1 then state = 3 end
local had = redis.call('HDEL', jobs, id)
redis.call('HDEL', errors, id)
if state == 0 and had == 1 then state = 1 end
return state
