--[[
restore: put items back into their group with their original arrival
times: a taken batch whose commit failed, parcels a commit left over (part
of their batch was batched another way, or the batch broke its area's rule),
or waiting parcels the reconciliation pass finds missing (Redis lost them).
Optionally sets the group's rule first (the caller's source of truth said
it, with the commit that left the items over: a rule Redis lost or missed
would otherwise take the same refused batch again and again), and
optionally takes out every full batch the group then holds, so a group made
full by a put back is batched at once and not only at its maximum wait.
Announces the group's deadline on the wake channel when it is the earliest,
so a flusher asleep past its new deadline wakes.

Why atomic: the rule, the items, the group's deadline and the take of full
batches must change together.

Uses lua/lib/chunk.lua and lua/lib/group.lua.

KEYS[1] groups      ZSET  group -> deadline (ms)
KEYS[2] groupRules  HASH  group -> "<batch size>,<max wait ms>" (absent: the defaults)
KEYS[3] items       ZSET  item -> arrival (ms): the group's

ARGV[1] wake channel
ARGV[2] group name
ARGV[3] default batch size, for a group without its own
ARGV[4] default maximum wait (ms), for a group without its own
ARGV[5] "1": take every full batch after the put back; "" to take none
ARGV[6] the group's rule to set first: "" leaves it, "-" back to the defaults,
        "<size>,<wait ms>" (either part may be empty: its default)
ARGV[7..] pairs of (arrival ms, item); an item already waiting keeps its arrival

Returns { deadline, size, takenCount, item1, arrival1, ... }
  deadline    the group's deadline after the call (ms), -1 if none waits
  size        the group's batch size (the taken items are a multiple of it)
  then the taken batches' items with their arrivals, oldest first.
]]
local groups, rules, items, group = KEYS[1], KEYS[2], KEYS[3], ARGV[2]
groupSetRule(rules, group, ARGV[6])
local size, wait = groupRule(rules, group, ARGV[3], ARGV[4])
callChunked('ZADD', items, ARGV, 2, 7, 'NX')
local deadline = groupRelist(groups, items, group, wait, false)
local taken = {}
if ARGV[5] ~= '' then
  local after
  taken, after = groupTakeFull(groups, items, group, size, wait)
  if #taken > 0 then deadline = after end
end
if deadline then groupAnnounce(groups, group, deadline, ARGV[1]) end
local out = { deadline or -1, size, #taken / 2 }
for i = 1, #taken do out[#out + 1] = taken[i] end
return out
