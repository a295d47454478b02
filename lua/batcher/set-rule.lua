--[[
set-rule: set (or clear) a group's own batch size and maximum wait, and
apply it to the items already waiting: the group is re-listed at its new
deadline (announced when it is the earliest, so a flusher asleep past it
wakes and takes the group if its first item has now waited long enough), and
every full batch the new size makes is taken out at once.

Why atomic: the rule, the group's deadline and the take must change
together, or an add between them could take a batch by the old size, or a
take-due could judge the group by a deadline of the old wait.

Uses lua/lib/group.lua.

KEYS[1] groups      ZSET  group -> deadline (ms)
KEYS[2] groupRules  HASH  group -> "<batch size>,<max wait ms>" (absent: the defaults)
KEYS[3] items       ZSET  item -> arrival (ms): the group's

ARGV[1] wake channel
ARGV[2] group name
ARGV[3] default batch size, for a group without its own
ARGV[4] default maximum wait (ms), for a group without its own
ARGV[5] the rule: "-" back to the defaults, or "<size>,<wait ms>" (either
        part may be empty: its default)

Returns { deadline, size, takenCount, item1, arrival1, ... }
  deadline    the group's deadline after the call (ms), -1 if none waits
  size        the group's batch size now
  then the full batches taken: items with their arrivals, oldest first.
]]
local groups, rules, items, group = KEYS[1], KEYS[2], KEYS[3], ARGV[2]
groupSetRule(rules, group, ARGV[5])
local size, wait = groupRule(rules, group, ARGV[3], ARGV[4])
local deadline = groupRelist(groups, items, group, wait, false)
local taken, after = groupTakeFull(groups, items, group, size, wait)
if #taken > 0 then deadline = after end
if deadline then groupAnnounce(groups, group, deadline, ARGV[1]) end
local out = { deadline or -1, size, #taken / 2 }
for i = 1, #taken do out[#out + 1] = taken[i] end
return out
