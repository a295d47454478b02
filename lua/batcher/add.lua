--[[
add: add an item to its group's waiting set and, when the group holds a
full batch, take it out (the oldest items; every full batch the group holds,
which is more than one only after a restore put many back).

Why atomic: the add, the size check and the take must be one step, or two
concurrent adds could both see a full group and take overlapping batches, or an
item could be added to a group that was just emptied without the group being
listed as waiting (and then wait forever).

A call carries a deadline on the Redis clock: one sent to a server that then
hung may run when it wakes, long after its caller gave up and answered;
past its deadline it changes nothing, so it cannot take a full batch out that
nobody is left to commit (the items would sit in neither Redis nor a batch
until the reconciliation pass).

The waiting set of a group is a ZSET scored by arrival time (not a plain SET):
the oldest items leave first, and after a take the group's first arrival is
exactly the oldest item left.

KEYS[1] groups  ZSET  group -> first arrival of its waiting items (ms)
KEYS[2] items   ZSET  item -> arrival time (ms since epoch, Redis clock): the group's

ARGV[1] wake channel (published with the first arrival when the group's first
        arrival moved earlier and it is the earliest group)
ARGV[2] group name
ARGV[3] item
ARGV[4] batch size (>= 1)
ARGV[5] arrival time of the item (ms since epoch), or "" for the Redis clock's now.
        The caller passes the time its source of truth recorded the arrival, so
        the maximum wait counts from there, not from when Redis heard of it.
ARGV[6] deadline (ms since epoch, Redis clock): past it the call does nothing; "" for none

Returns { now, added, waiting, takenCount, item1, arrival1, item2, ... }
  now         Redis clock (ms)
  added       1 if the item was new, 0 if it was already waiting (idempotent),
              -1 if the call came after its deadline and did nothing
  waiting     how many items of the group wait after this call
  then the taken batches: their items with their arrival times, oldest first, a
  multiple of the batch size (empty unless the group reached the batch size).
]]
local groups, items = KEYS[1], KEYS[2]
local group, item, size = ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = nowMs()
if ARGV[6] ~= '' and now > tonumber(ARGV[6]) then return { now, -1, 0, 0 } end
local arrival = ARGV[5]
if arrival == '' then arrival = string.format('%d', now) end

local added = redis.call('ZADD', items, 'NX', arrival, item)
-- A group's first arrival only ever moves earlier on an add: a group that
-- starts waiting, or an item older than every waiting one (an intake repeated
-- after Redis lost it, two intakes reaching Redis out of their order).
if added == 1 and redis.call('ZADD', groups, 'LT', 'CH', arrival, group) == 1 then
  groupAnnounce(groups, group, arrival, ARGV[1])
end
local count = redis.call('ZCARD', items)

local out = { now, added, count, 0 }
if count >= size then
  local taken = groupTakeFull(groups, items, group, size)
  out[4] = #taken / 2
  for i = 1, #taken do out[#out + 1] = taken[i] end
  out[3] = count - #taken / 2
end
return out
