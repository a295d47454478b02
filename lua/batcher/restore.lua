--[[
restore: put items back into their group with their original arrival
times: a taken batch whose commit failed, parcels a commit left over (part
of their batch was batched another way), or waiting parcels the
reconciliation pass finds missing (Redis lost them). Optionally takes out
every full batch the group then holds, so a group made full by a put back is
batched at once and not only at its maximum wait. Announces the group on
the wake channel when it is the earliest, so a flusher asleep past its new
deadline wakes.

Why atomic: the items, the group's first arrival and the take of full
batches must change together.

Uses lua/lib/chunk.lua and lua/lib/group.lua.

KEYS[1] groups  ZSET  group -> first arrival (ms)
KEYS[2] items   ZSET  item -> arrival (ms): the group's

ARGV[1] wake channel
ARGV[2] group name
ARGV[3] batch size: take every full batch after the put back; "" to take none
ARGV[4..] pairs of (arrival ms, item); an item already waiting keeps its arrival

Returns { first, takenCount, item1, arrival1, ... }
  first       the group's first arrival after the call (ms), -1 if none waits
  then the taken batches' items with their arrivals, oldest first (a multiple
  of the batch size).
]]
local groups, items, group = KEYS[1], KEYS[2], ARGV[2]
callChunked('ZADD', items, ARGV, 2, 4, 'NX')
local first = groupRelist(groups, items, group, false)
local taken = {}
if ARGV[3] ~= '' then
  local after
  taken, after = groupTakeFull(groups, items, group, tonumber(ARGV[3]))
  if #taken > 0 then first = after end
end
if first then groupAnnounce(groups, group, first, ARGV[1]) end
local out = { first and tonumber(first) or -1, #taken / 2 }
for i = 1, #taken do out[#out + 1] = taken[i] end
return out
