--[[
add: add an item to its group's waiting set and, when the group holds a
full batch (by the group's own batch size), take it out (the oldest items;
every full batch the group holds, which is more than one only after a
restore put many back or the group's size was lowered).

Why atomic: the add, the rule's read, the size check and the take must be
one step, or two concurrent adds could both see a full group and take
overlapping batches, an add could count against a size a rule change just
replaced, or an item could be added to a group that was just emptied without
the group being listed as waiting (and then wait forever).

A call carries a deadline on the Redis clock: one sent to a server that then
hung may run when it wakes, long after its caller gave up and answered;
past its deadline it changes nothing, so it cannot take a full batch out that
nobody is left to commit (the items would sit in neither Redis nor a batch
until the reconciliation pass).

The waiting set of a group is a ZSET scored by arrival time (not a plain SET):
the oldest items leave first, and after a take the group's deadline is
exactly the oldest item left's arrival + the group's maximum wait.

Uses lua/lib/time.lua and lua/lib/group.lua.

KEYS[1] groups      ZSET  group -> deadline of its waiting items (ms): first arrival + max wait
KEYS[2] groupRules  HASH  group -> "<batch size>,<max wait ms>[,<version>]" (absent: the defaults)
KEYS[3] items       ZSET  item -> arrival time (ms since epoch, Redis clock): the group's

ARGV[1] wake channel (published with the group's deadline when the deadline
        moved earlier and the group is the earliest)
ARGV[2] group name
ARGV[3] item
ARGV[4] default batch size (>= 1), for a group without its own
ARGV[5] default maximum wait (ms), for a group without its own
ARGV[6] arrival time of the item (ms since epoch), or "" for the Redis clock's now.
        The caller passes the time its source of truth recorded the arrival, so
        the maximum wait counts from there, not from when Redis heard of it.
ARGV[7] deadline (ms since epoch, Redis clock): past it the call does nothing; "" for none

Returns { now, added, waiting, size, takenCount, item1, arrival1, item2, ... }
  now         Redis clock (ms)
  added       1 if the item was new, 0 if it was already waiting (idempotent),
              -1 if the call came after its deadline and did nothing
  waiting     how many items of the group wait after this call
  size        the group's batch size (the taken items are a multiple of it)
  then the taken batches: their items with their arrival times, oldest first
  (empty unless the group reached its batch size).
]]
local groups, rules, items = KEYS[1], KEYS[2], KEYS[3]
local group, item = ARGV[2], ARGV[3]
local now = nowMs()
if ARGV[7] ~= '' and now > tonumber(ARGV[7]) then return { now, -1, 0, 0, 0 } end
local size, wait = groupRule(rules, group, ARGV[4], ARGV[5])
local arrival = ARGV[6]
if arrival == '' then arrival = string.format('%d', now) end

local added = redis.call('ZADD', items, 'NX', arrival, item)
-- A group's deadline only ever moves earlier on an add: a group that starts
-- waiting, or an item older than every waiting one (an intake repeated after
-- Redis lost it, two intakes reaching Redis out of their order).
local deadline = tonumber(arrival) + wait
if added == 1 and redis.call('ZADD', groups, 'LT', 'CH', deadline, group) == 1 then
  groupAnnounce(groups, group, deadline, ARGV[1])
end
local count = redis.call('ZCARD', items)

local out = { now, added, count, size, 0 }
if count >= size then
  local taken = groupTakeFull(groups, items, group, size, wait)
  out[5] = #taken / 2
  for i = 1, #taken do out[#out + 1] = taken[i] end
  out[3] = count - #taken / 2
end
return out
