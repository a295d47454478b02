--[[
stats: counts for one queue shard as a consistent snapshot (read-only),
with "due now" judged by the Redis clock.

Uses lua/lib/due-index.lua.

KEYS[1] due         ZSET  bucket name -> lower bound (ms)
KEYS[2] dueBuckets  prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight    ZSET
KEYS[4] jobs        HASH
KEYS[5] dead        ZSET

Returns { now, pending, dueNow, inFlight, dead, nextDue (-1 if none) }
pending counts every job waiting in the due index, due now or later: every
job with a record is pending, in flight or dead, so it is the records less the
other two (O(1), where summing the buckets would read every one). dueNow reads
the buckets that start by now, one call each.
]]
local due, dueBuckets, inflight, jobs, deadSet = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
dueUse(due, dueBuckets)
local now = nowMs()
local inFlight, dead = redis.call('ZCARD', inflight), redis.call('ZCARD', deadSet)
return {
  now,
  redis.call('HLEN', jobs) - inFlight - dead,
  dueCount(now),
  inFlight,
  dead,
  dueHead() or -1,
}
