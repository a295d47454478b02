--[[
nack: a delivery failed; schedule the retry or move the job to the dead set.
The worker decides which (it knows the attempt count, the job type's limit and
whether the error is retryable) and computes the backoff with jitter.

Why atomic: the lease check, the move out of in-flight and the write of the
error must be one step, or a stale worker could push back a delivery that
another worker now holds, or the job could be lost between the sets.

Uses lua/lib/record.lua, chunk.lua, records.lua and due-index.lua.

KEYS[1] due           ZSET  bucket name -> lower bound (ms)
KEYS[2] dueBuckets    prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight      ZSET  job id -> lease deadline (ms)
KEYS[4] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[5] records       HASH  the record groups' level, split pointer and count
KEYS[6] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[7] dead          ZSET  job id -> time of death (ms)
KEYS[8] errors        HASH  job id -> last error text

ARGV[1] wake channel
ARGV[2] job id
ARGV[3] token (the one the claim handed out)
ARGV[4] outcome: "retry" | "dead"
ARGV[5] retry delay (ms from the Redis clock's now; ignored for "dead")
ARGV[6] error text

Returns { code, time }: code 1 retry scheduled at time (ms), 2 dead since time
(ms), 0 stale (token did not match or job not in flight; nothing changed).
]]
local due, dueBuckets, inflight, dead, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[7], KEYS[8]
dueUse(due, dueBuckets)
recUse(KEYS[4], KEYS[5], KEYS[6])
recMakeRoom(1)
local id, token, outcome = ARGV[2], ARGV[3], ARGV[4]
local rec, key = recGet(id, true)
if not recordHeldBy(rec, token) or not redis.call('ZSCORE', inflight, id) then
  return { 0, 0 }
end
local now = nowMs()
redis.call('ZREM', inflight, id)
redis.call('HSET', errors, id, ARGV[6])
if outcome == 'dead' then
  redis.call('ZADD', dead, now, id)
  return { 2, now }
end
local at = now + math.ceil(tonumber(ARGV[5]))
local atText = string.format('%d', at)
-- Token 0 (never handed out) while pending; the attempt stays counted.
recPut(key, id, recordRequeued(rec, atText, false))
recDone()
dueAdd(atText, id, recordPriority(rec))
if dueHead() == at then redis.call('PUBLISH', ARGV[1], at) end
return { 1, at }
