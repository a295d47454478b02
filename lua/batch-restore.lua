--[[
batch-restore: put a taken batch back (its commit failed), with the items'
original arrival times, so they are flushed again instead of waiting for the
reconciliation pass.

Why atomic: the items and the group's first arrival must change together.

KEYS[1] group items  ZSET  item -> arrival (ms)
KEYS[2] groups       ZSET  group -> first arrival (ms)

ARGV[1] group name
ARGV[2..] pairs of (arrival ms, item)

Returns the group's first arrival after the restore (ms).
]]
local items, groups = KEYS[1], KEYS[2]
for i = 2, #ARGV, 1000 do
  redis.call('ZADD', items, 'NX', unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local first = redis.call('ZRANGE', items, 0, 0, 'WITHSCORES')
if first[2] then
  redis.call('ZADD', groups, first[2], ARGV[1])
  return tonumber(first[2])
end
return -1
