--[[
stats: counts for one queue shard as a consistent snapshot (read-only),
with "due now" judged by the Redis clock.

Uses lua/lib/due-index.lua.

KEYS[1] due index     ZSET  bucket name -> lower bound (ms)
KEYS[2] due buckets   prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight      ZSET
KEYS[4] dead          ZSET
KEYS[5] jobs          HASH

Returns { now, pending, dueNow, inFlight, dead, nextDue (-1 if none) }
pending counts every job waiting in the due index, due now or later: every
job with a record is pending, in flight or dead, so it is the records less the
other two (O(1), where summing the buckets would read every one). dueNow reads
the buckets that start by now, one call each.
]]
dueUse(KEYS[1], KEYS[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local inFlight, dead = redis.call('ZCARD', KEYS[3]), redis.call('ZCARD', KEYS[4])
return {
  now,
  redis.call('HLEN', KEYS[5]) - inFlight - dead,
  dueCount(now),
  inFlight,
  dead,
  dueHead() or -1,
}
