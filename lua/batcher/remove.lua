--[[
remove: drop items from a group's waiting set (they were batched another
way, e.g. by the reconciliation pass) and keep the group's first arrival right.

Why atomic: removing items and re-reading the oldest one left must be one step,
or a concurrent add could leave the group listed with a wrong first arrival.

KEYS[1] groups  ZSET  group -> first arrival (ms)
KEYS[2] items   ZSET  item -> arrival (ms): the group's

ARGV[1] group name
ARGV[2..] items

Returns the number of items removed.
]]
local groups, items = KEYS[1], KEYS[2]
local removed = callChunked('ZREM', items, ARGV, 1, 2)
groupRelist(groups, items, ARGV[1], true)
return removed
