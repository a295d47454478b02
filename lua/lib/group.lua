--[[
group (a library, not a script: scripts/registry.ts puts it in front of the batcher's
scripts)

A group's waiting items are a ZSET scored by arrival; the groups ZSET lists
each group that has waiting items at its oldest item's arrival. Every script
that takes items out or puts them back re-lists the group here, so its first
arrival is always exact (the flusher sleeps until first arrival + max wait).
]]

-- Lists `group` in `groups` at the arrival of its oldest item in `items`, or
-- unlists it when none is left. `onlyIfListed`: never list a group that is not
-- listed (ZADD XX). Returns the first arrival (a string of digits) or nil.
local function groupRelist(groups, items, group, onlyIfListed)
  local first = redis.call('ZRANGE', items, '0', '0', 'WITHSCORES')
  if first[2] then
    if onlyIfListed then redis.call('ZADD', groups, 'XX', first[2], group) else redis.call('ZADD', groups, first[2], group) end
    return first[2]
  end
  redis.call('ZREM', groups, group)
  return nil
end

-- Takes every full batch the group holds (its oldest items, a multiple of
-- `size`) and re-lists the group. Returns the taken items with their
-- arrivals, flat (item, arrival, ...), oldest first (empty when not full),
-- and when something was taken the group's first arrival after it (or nil).
local function groupTakeFull(groups, items, group, size)
  local count = redis.call('ZCARD', items)
  local n = count - count % size
  if n == 0 then return {}, nil end
  local taken = redis.call('ZPOPMIN', items, n)
  return taken, groupRelist(groups, items, group, false)
end

-- Announces `first` (the group's first arrival) on `wake` when the group is
-- the earliest waiting one: the flusher then sleeps until first + max wait.
local function groupAnnounce(groups, group, first, wake)
  local head = redis.call('ZRANGE', groups, 0, 0)
  if head[1] == group then redis.call('PUBLISH', wake, first) end
end
