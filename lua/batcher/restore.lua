--[[
restore: put items back into their group with their original arrival
times (a taken batch whose commit failed, parcels a commit left over, a
parcel moved in from another group, waiting parcels the reconciliation pass
finds missing because Redis lost them), and/or set the group's rule and
apply it to what waits. With a rule and no items it is the rule's change
alone (PUT /areas): the group is re-listed at its new deadline (announced
when it is the earliest, so a flusher asleep past it wakes and takes the
group if its first item has now waited long enough), and with ARGV[5] every
full batch the new size makes is taken out at once. A rule given with items
(the caller's source of truth said it, with the commit that left them over)
keeps a group whose rule Redis lost or missed from taking the same refused
batch again and again. A rule of an older version than the group's is
refused (lua/lib/group.lua): the group keeps the newer one, and the items go
back by it.

Why atomic: the rule, the items, the group's deadline and the take of full
batches must change together, or an add between them could take a batch by
the old size, or a take-due could judge the group by a deadline of the old
wait.

Uses lua/lib/chunk.lua and lua/lib/group.lua.

KEYS[1] groups      ZSET  group -> deadline (ms)
KEYS[2] groupRules  HASH  group -> "<batch size>,<max wait ms>[,<version>]" (absent: the defaults)
KEYS[3] items       ZSET  item -> arrival (ms): the group's

ARGV[1] wake channel
ARGV[2] group name
ARGV[3] default batch size, for a group without its own
ARGV[4] default maximum wait (ms), for a group without its own
ARGV[5] "1": take every full batch after the call; "" to take none
ARGV[6] the group's rule to set first: "" leaves it, "-" back to the defaults,
        "<size>,<wait ms>" (either part may be empty: its default), or
        "<size>,<wait ms>,<version>" (refused when the group's is of a later version)
ARGV[7..] pairs of (arrival ms, item), none for a rule's change alone; an
        item already waiting keeps its arrival

Returns { deadline, size, takenCount, item1, arrival1, ... }
  deadline    the group's deadline after the call (ms), -1 if none waits
  size        the group's batch size after the call (the taken items are a multiple of it)
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
