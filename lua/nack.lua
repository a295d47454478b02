--[[
nack: a delivery failed; schedule the retry or move the job to the dead set.
The worker decides which (it knows the attempt count, the job type's limit and
whether the error is retryable) and computes the backoff with jitter.

Why atomic: the lease check, the move out of in-flight and the write of the
error must be one step, or a stale worker could push back a delivery that
another worker now holds, or the job could be lost between the sets.

Uses lua/lib/due-index.lua.

KEYS[1] inflight      ZSET  job id -> lease deadline (ms)
KEYS[2] due index     ZSET  bucket name -> lower bound (ms)
KEYS[3] due buckets   prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[4] jobs          HASH  job id -> record "gen,attempts,due,maxAttempts,type,payload"
KEYS[5] errors        HASH  job id -> last error text
KEYS[6] dead          ZSET  job id -> time of death (ms)

ARGV[1] job id
ARGV[2] token (generation from the claim)
ARGV[3] outcome: "retry" | "dead"
ARGV[4] retry delay (ms from the Redis clock's now; ignored for "dead")
ARGV[5] error text
ARGV[6] wake channel

Returns { code, time }: code 1 retry scheduled at time (ms), 2 dead since time
(ms), 0 stale (token did not match or job not in flight; nothing changed).
]]
local inflight, jobs, errors, dead = KEYS[1], KEYS[4], KEYS[5], KEYS[6]
dueUse(KEYS[2], KEYS[3])
local id, token, outcome = ARGV[1], ARGV[2], ARGV[3]
local rec = redis.call('HGET', jobs, id)
if not rec or string.match(rec, '^(%d+),') ~= token or not redis.call('ZSCORE', inflight, id) then
  return { 0, 0 }
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', inflight, id)
redis.call('HSET', errors, id, ARGV[5])
if outcome == 'dead' then
  redis.call('ZADD', dead, now, id)
  return { 2, now }
end
local at = now + math.ceil(tonumber(ARGV[4]))
local atText = string.format('%d', at)
-- Generation 0 (never a token) while pending; the attempt stays counted.
local attempts, rest = string.match(rec, '^%d+,(%d+),%d+,(.*)$')
redis.call('HSET', jobs, id, '0,' .. attempts .. ',' .. atText .. ',' .. rest)
dueAdd(atText, id)
if dueHead() == at then redis.call('PUBLISH', ARGV[6], at) end
return { 1, at }
