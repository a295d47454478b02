--[[
batch-add: add an item to its group's waiting set and, when the group holds a
full batch, take exactly one batch (the oldest items) out.

Why atomic: the add, the size check and the take must be one step, or two
concurrent adds could both see a full group and take overlapping batches, or an
item could be added to a group that was just emptied without the group being
listed as waiting (and then wait forever).

The waiting set of a group is a ZSET scored by arrival time (not a plain SET):
the oldest items leave first, and after a take the group's first arrival is
exactly the oldest item left.

KEYS[1] group items  ZSET  item -> arrival time (ms since epoch, Redis clock)
KEYS[2] groups       ZSET  group -> first arrival of its waiting items (ms)

ARGV[1] group name
ARGV[2] item
ARGV[3] batch size (>= 1)
ARGV[4] wake channel (published with the first arrival when a group starts waiting
        and becomes the earliest one)
ARGV[5] arrival time of the item (ms since epoch), or "" for the Redis clock's now.
        The caller passes the time its source of truth recorded the arrival, so
        the maximum wait counts from there, not from when Redis heard of it.

Returns { added, waiting, takenCount, item1, arrival1, item2, ... }
  added       1 if the item was new, 0 if it was already waiting (idempotent)
  waiting     how many items of the group wait after this call
  then the taken batch: its items with their arrival times, oldest first (empty
  unless the group reached the batch size).
]]
local items, groups = KEYS[1], KEYS[2]
local group, item, size = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- The common call (an item joins a group that is not full) is two commands:
-- ZADD and ZCARD. The group list is only touched when the group starts or
-- empties, which is when its first arrival changes.
local arrival = ARGV[5]
if arrival == '' then
  local t = redis.call('TIME')
  arrival = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end

local added = redis.call('ZADD', items, 'NX', arrival, item)
local count = redis.call('ZCARD', items)
if added == 1 and count == 1 then
  redis.call('ZADD', groups, arrival, group)
  local head = redis.call('ZRANGE', groups, 0, 0)
  if head[1] == group then redis.call('PUBLISH', ARGV[4], arrival) end
end

local out = { added, count, 0 }
if count >= size then
  local taken = redis.call('ZPOPMIN', items, size)
  out[3] = #taken / 2
  for i = 1, #taken do out[#out + 1] = taken[i] end
  local first = redis.call('ZRANGE', items, 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('ZADD', groups, first[2], group)
  else
    redis.call('ZREM', groups, group)
  end
  out[2] = count - #taken / 2
end
return out
