--[[
trim-dead: forget dead jobs past the queue's retention: those that died
before a cutoff, then the oldest beyond a maximum count, a bounded number per
call. Without it every job that ever failed for good keeps its record, payload
and last error for ever, and Redis, run with noeviction as it must be, ends up
refusing writes and stops every queue.

Why atomic: a dead job's set entry, record and error text must go together,
or a trimmed job could leave a record no set lists (a leak that nothing
finds), or a job redriven at the same moment could lose its record.

KEYS[1] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[2] records       HASH  the record groups' level, split pointer and count
KEYS[3] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[4] dead          ZSET  job id -> time of death (ms since epoch)
KEYS[5] errors        HASH  job id -> last error text

ARGV[1] max age (ms): jobs dead longer than this go
ARGV[2] max count: beyond this many dead jobs, the oldest go
ARGV[3] most jobs removed by this call
ARGV[4] min age (ms) for the count rule: a job dead for less is kept even over
        the count (the notifications relay must see a dead delivery job before
        it goes, or it would schedule the delivery again)

Returns how many dead jobs were removed.
]]
local dead, errors = KEYS[4], KEYS[5]
recUse(KEYS[1], KEYS[2], KEYS[3])
local maxAge, maxCount, limit, minAge = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = nowMs()

local ids = redis.call('ZRANGE', dead, '-inf', string.format('%d', now - maxAge), 'BYSCORE', 'LIMIT', '0', tostring(limit))
if #ids < limit then
  local over = redis.call('ZCARD', dead) - #ids - maxCount
  if over > 0 then
    ids = redis.call('ZRANGE', dead, '-inf', string.format('%d', now - minAge), 'BYSCORE', 'LIMIT', '0', tostring(#ids + math.min(over, limit - #ids)))
  end
end
callChunked('ZREM', dead, ids)
for _, id in ipairs(ids) do recRemove(id) end
callChunked('HDEL', errors, ids)
recDone()
return #ids
