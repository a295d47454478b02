--[[
take-due: take one batch (the oldest items, up to the group's batch size) out
of every group whose deadline (first arrival + the group's maximum wait) is
at or before now, a bounded number of groups per call.

Why atomic: finding the due groups and emptying them must be one step, or an
item added between the two could be taken without its group being re-listed,
or a full-size take by add.lua could interleave and split a batch.

Group item keys are the prefix in KEYS[3] followed by the group name: which
groups are due is only known inside the script (lib/due-index.lua builds its
bucket keys the same way). The prefix carries the shard's hash tag, so every
key stays in the same Redis Cluster slot, and declaring it keeps the script
off a migrating slot (lua/README.md).

Uses lua/lib/time.lua and lua/lib/group.lua.

KEYS[1] groups        ZSET  group -> deadline of its waiting items (ms)
KEYS[2] groupRules    HASH  group -> "<batch size>,<max wait ms>[,<version>]" (absent: the defaults)
KEYS[3] itemsPrefix   (not a key itself) group items ZSET = prefix .. group

ARGV[1] default maximum wait (ms), for a group without its own
ARGV[2] max groups to take this call
ARGV[3] default batch size, for a group without its own
ARGV[4] deadline (ms since epoch, Redis clock): past it the call does nothing
        (a flusher gave up waiting for it: see add.lua); "" for none

Returns { now, nextDeadline, groupCount, group1, count1, item, arrival, ..., group2, ... }
  nextDeadline  earliest group deadline still waiting after this call (ms),
                -1 if none, -2 if the call came after its deadline and did nothing
  per group taken: its name, how many items, then each item with its arrival (oldest first).
]]
local groups, rules, prefix = KEYS[1], KEYS[2], KEYS[3]
local maxGroups = tonumber(ARGV[2])
local now = nowMs()
if ARGV[4] ~= '' and now > tonumber(ARGV[4]) then return { now, -2, 0 } end

local due = redis.call('ZRANGEBYSCORE', groups, '-inf', now, 'LIMIT', 0, maxGroups)
local out = { now, -1, #due }
for _, group in ipairs(due) do
  local key = prefix .. group
  local size, wait = groupRule(rules, group, ARGV[3], ARGV[1])
  local taken = redis.call('ZPOPMIN', key, size)
  out[#out + 1] = group
  out[#out + 1] = #taken / 2
  for i = 1, #taken do out[#out + 1] = taken[i] end
  groupRelist(groups, key, group, wait, true)
end

local head = redis.call('ZRANGE', groups, 0, 0, 'WITHSCORES')
if head[2] then out[2] = tonumber(head[2]) end
return out
