--[[
remove: drop items from a group's waiting set (batched another way, e.g. by
the reconciliation pass or a manual flush; withdrawn; moved to another group)
and keep the group's deadline right.

Why atomic: removing items and re-reading the oldest one left must be one step,
or a concurrent add could leave the group listed with a wrong deadline.

Uses lua/lib/chunk.lua and lua/lib/group.lua.

KEYS[1] groups      ZSET  group -> deadline (ms)
KEYS[2] groupRules  HASH  group -> "<batch size>,<max wait ms>[,<version>]" (absent: the defaults)
KEYS[3] items       ZSET  item -> arrival (ms): the group's

ARGV[1] group name
ARGV[2] default maximum wait (ms), for a group without its own
ARGV[3..] items

Returns the number of items removed.
]]
local groups, rules, items = KEYS[1], KEYS[2], KEYS[3]
local removed = callChunked('ZREM', items, ARGV, 1, 3)
local _, wait = groupRule(rules, ARGV[1], 1, ARGV[2])
groupRelist(groups, items, ARGV[1], wait, true)
return removed
