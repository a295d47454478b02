--[[
stats: counts for one queue shard as a consistent snapshot (read-only),
with "due now" judged by the Redis clock.

KEYS[1] due  KEYS[2] inflight  KEYS[3] dead

Returns { now, pending, dueNow, inFlight, dead, nextDue (-1 if none) }
pending counts every job waiting in the due set, due now or later.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {
  now,
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCOUNT', KEYS[1], '-inf', now),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  head[2] and tonumber(head[2]) or -1,
}
