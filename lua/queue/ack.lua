--[[
ack: finish jobs a worker has completed (bulk), deleting them.

Why atomic: the check that the caller still holds the lease (job in flight and
its record's token equal to the caller's) and the delete must be one step,
or a worker whose lease expired could delete the delivery now held by another.

KEYS[1] inflight      ZSET  job id -> lease deadline (ms)
KEYS[2] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[3] records       HASH  the record groups' level, split pointer and count
KEYS[4] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[5] errors        HASH  job id -> last error text

ARGV: pairs of (job id, token) where token is the one the claim handed out.
A lease that ran out but was not yet handed to anyone else still acks: the
work was done and nobody else holds the job.

Returns { acked, staleId1, staleId2, ... }: how many were deleted, then the ids
whose token no longer matched (cancelled, rescheduled or redelivered).
]]
local inflight, errors = KEYS[1], KEYS[5]
recUse(KEYS[2], KEYS[3], KEYS[4])
local n = #ARGV / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i - 1] end
local valid, stale, inHash = {}, {}, {}
for i = 1, n, CHUNK do
  local last = math.min(i + CHUNK - 1, n)
  local recs, keys = recGetMany(ids, i, last, true)
  local leases = redis.call('ZMSCORE', inflight, unpack(ids, i, last))
  for j = i, last do
    local rec, leased = recs[j - i + 1], leases[j - i + 1]
    if leased and recordHeldBy(rec, ARGV[2 * j]) then
      valid[#valid + 1] = ids[j]
      local key = keys[j - i + 1]
      if key == recLegacy then inHash[#inHash + 1] = ids[j] else recDelete(key, ids[j]) end
    else
      stale[#stale + 1] = ids[j]
    end
  end
end
callChunked('ZREM', inflight, valid)
callChunked('HDEL', recLegacy, inHash)
callChunked('HDEL', errors, valid)
recDone()
local out = { #valid }
for _, id in ipairs(stale) do out[#out + 1] = id end
return out
