--[[
stats: counts for one queue shard as a consistent snapshot (read-only),
with "due now" judged by the Redis clock.

Uses lua/lib/records.lua, due-index.lua and pause.lua.

KEYS[1] due           ZSET  bucket name -> lower bound (ms)
KEYS[2] dueBuckets    prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight      ZSET
KEYS[4] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[5] records       HASH  the record groups' level, split pointer and count
KEYS[6] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[7] dead          ZSET
KEYS[8] paused        HASH  '*' or job type -> ms paused at
KEYS[9] parked        prefix of the parked ZSETs, one per type (no such key)
ARGV    the queue's job types (whose parked ZSETs are counted)

Returns { now, pending, dueNow, inFlight, dead, nextDue (-1 if none), parked,
          paused: '*' and the paused types, as one comma-separated text }
pending counts every job waiting in the due index, due now or later: every
job with a record is pending, in flight or dead, so it is the records less the
other two (O(1), where summing the buckets would read every one). dueNow reads
the buckets that start by now, one call each; parked jobs are pending but
not in dueNow (no claim takes them while their type is paused).
]]
local due, dueBuckets, inflight, deadSet = KEYS[1], KEYS[2], KEYS[3], KEYS[7]
dueUse(due, dueBuckets)
recUse(KEYS[4], KEYS[5], KEYS[6])
pauseUse(KEYS[8], KEYS[9])
local now = nowMs()
local inFlight, dead = redis.call('ZCARD', inflight), redis.call('ZCARD', deadSet)
local parked = 0
for _, typ in ipairs(ARGV) do parked = parked + redis.call('ZCARD', parkedKey(typ)) end
return {
  now,
  recTotal() - inFlight - dead,
  dueCount(now),
  inFlight,
  dead,
  dueHead() or -1,
  parked,
  table.concat(redis.call('HKEYS', KEYS[8]), ','),
}
