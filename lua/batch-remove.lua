--[[
batch-remove: drop items from a group's waiting set (they were batched another
way, e.g. by the reconciliation pass) and keep the group's first arrival right.

Why atomic: removing items and re-reading the oldest one left must be one step,
or a concurrent add could leave the group listed with a wrong first arrival.

KEYS[1] group items  ZSET  item -> arrival (ms)
KEYS[2] groups       ZSET  group -> first arrival (ms)

ARGV[1] group name
ARGV[2..] items

Returns the number of items removed.
]]
local items, groups = KEYS[1], KEYS[2]
local removed = 0
for i = 2, #ARGV, 500 do
  removed = removed + redis.call('ZREM', items, unpack(ARGV, i, math.min(i + 499, #ARGV)))
end
local first = redis.call('ZRANGE', items, 0, 0, 'WITHSCORES')
if first[2] then
  redis.call('ZADD', groups, 'XX', first[2], ARGV[1])
else
  redis.call('ZREM', groups, ARGV[1])
end
return removed
