--[[
extend: a long-running handler renews its lease.

Why atomic: the token check and the new deadline must be one step, or a
worker whose lease already went to another could push that delivery's lease.

KEYS[1] inflight      ZSET  job id -> lease deadline (ms)
KEYS[2] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[3] records       HASH  the record groups' level, split pointer and count
KEYS[4] recordGroups  prefix of the record groups (no such key; lua/README.md)

ARGV[1] job id
ARGV[2] token (the one the claim handed out)
ARGV[3] new lease length (ms from the Redis clock's now)

Returns the new deadline (ms), or 0 when the lease is lost (nothing changed).
]]
local inflight = KEYS[1]
recUse(KEYS[2], KEYS[3], KEYS[4])
local rec = recGet(ARGV[1], true)
if not recordHeldBy(rec, ARGV[2]) or not redis.call('ZSCORE', inflight, ARGV[1]) then
  return 0
end
local deadline = nowMs() + tonumber(ARGV[3])
redis.call('ZADD', inflight, deadline, ARGV[1])
return deadline
