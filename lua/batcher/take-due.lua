--[[
take-due: take one batch (the oldest items, up to the batch size) out of
every group whose first arrival is at or before now - max wait, a bounded number
of groups per call.

Why atomic: finding the due groups and emptying them must be one step, or an
item added between the two could be taken without its group being re-listed,
or a full-size take by add.lua could interleave and split a batch.

Group item keys are the prefix in KEYS[2] followed by the group name: which
groups are due is only known inside the script (lib/due-index.lua builds its
bucket keys the same way). The prefix carries the shard's hash tag, so every
key stays in the same Redis Cluster slot, and declaring it keeps the script
off a migrating slot (lua/README.md).

KEYS[1] groups        ZSET  group -> first arrival of its waiting items (ms)
KEYS[2] itemsPrefix   (not a key itself) group items ZSET = prefix .. group

ARGV[1] max wait (ms)
ARGV[2] max groups to take this call
ARGV[3] batch size
ARGV[4] deadline (ms since epoch, Redis clock): past it the call does nothing
        (a flusher gave up waiting for it: see add.lua); "" for none

Returns { now, nextFirstArrival, groupCount, group1, count1, item, arrival, ..., group2, ... }
  nextFirstArrival  earliest first arrival still waiting after this call (ms),
                    -1 if none, -2 if the call came after its deadline and did nothing
  per group taken: its name, how many items, then each item with its arrival (oldest first).
]]
local groups, prefix = KEYS[1], KEYS[2]
local maxWait, maxGroups, size = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = nowMs()
if ARGV[4] ~= '' and now > tonumber(ARGV[4]) then return { now, -2, 0 } end

local due = redis.call('ZRANGEBYSCORE', groups, '-inf', now - maxWait, 'LIMIT', 0, maxGroups)
local out = { now, -1, #due }
for _, group in ipairs(due) do
  local key = prefix .. group
  local taken = redis.call('ZPOPMIN', key, size)
  out[#out + 1] = group
  out[#out + 1] = #taken / 2
  for i = 1, #taken do out[#out + 1] = taken[i] end
  groupRelist(groups, key, group, true)
end

local head = redis.call('ZRANGE', groups, 0, 0, 'WITHSCORES')
if head[2] then out[2] = tonumber(head[2]) end
return out
