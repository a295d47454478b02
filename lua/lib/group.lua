--[[
group (a library, not a script: scripts/registry.ts puts it in front of the batcher's
scripts)

A group's waiting items are a ZSET scored by arrival; the groups ZSET lists
each group that has waiting items at its deadline: its oldest item's arrival
plus the group's maximum wait. Every script that takes items out, puts them
back or changes the group's rule re-lists the group here, so its deadline is
always exact (the flusher sleeps until the earliest deadline).

A group's rule (batch size, maximum wait) is a field of the shard's `rules`
HASH, "<size>,<wait ms>[,<version>]", either part empty for the caller's
default; a group without a field takes both defaults. The version (a whole
number >= 1, the caller's source of truth raises it with every change) lets
a rule read before a newer one was set (a put back, a late call) be refused
instead of undoing the newer one; a versioned rule of two defaults is kept
as ",,<version>" for the same reason.
]]

-- A rule's parts: its size and wait (nil where empty: the default) and its
-- version (0 when it has none, or is not a rule at all).
local function groupParse(r)
  local s, w, v = string.match(r, '^(%d*),(%d*),?(%d*)$')
  if not s then return nil, nil, 0 end
  return tonumber(s), tonumber(w), tonumber(v) or 0
end

-- The group's batch size and maximum wait (ms): its rule's, else the defaults.
local function groupRule(rules, group, defSize, defWait)
  local size, wait = tonumber(defSize), tonumber(defWait)
  local r = redis.call('HGET', rules, group)
  if r then
    local s, w = groupParse(r)
    if s then size = s end
    if w then wait = w end
  end
  return size, wait
end

-- Sets the group's rule from `rule`: "" leaves it, "-" clears it (both
-- defaults), "<size>,<wait ms>" sets it (either part may be empty), and
-- "<size>,<wait ms>,<version>" sets it unless the group holds a rule of a
-- later version (a put back or a late call carrying a rule read before the
-- newer one was set must not undo it). Returns false when it refused.
local function groupSetRule(rules, group, rule)
  if rule == '' then return true end
  local _, _, version = groupParse(rule)
  if version > 0 then
    local held = redis.call('HGET', rules, group)
    if held then
      local _, _, heldVersion = groupParse(held)
      if heldVersion > version then return false end
    end
    redis.call('HSET', rules, group, rule)
  elseif rule == '-' or rule == ',' then
    redis.call('HDEL', rules, group)
  else
    redis.call('HSET', rules, group, rule)
  end
  return true
end

-- Lists `group` in `groups` at its deadline (the arrival of its oldest item
-- in `items` + `wait` ms), or unlists it when none is left. `onlyIfListed`:
-- never list a group that is not listed (ZADD XX). Returns the deadline (a
-- number, ms) or nil.
local function groupRelist(groups, items, group, wait, onlyIfListed)
  local first = redis.call('ZRANGE', items, '0', '0', 'WITHSCORES')
  if first[2] then
    local deadline = tonumber(first[2]) + wait
    if onlyIfListed then
      redis.call('ZADD', groups, 'XX', deadline, group)
    else
      redis.call('ZADD', groups, deadline, group)
    end
    return deadline
  end
  redis.call('ZREM', groups, group)
  return nil
end

-- Takes every full batch the group holds (its oldest items, a multiple of
-- `size`) and re-lists the group. Returns the taken items with their
-- arrivals, flat (item, arrival, ...), oldest first (empty when not full),
-- and when something was taken the group's deadline after it (or nil).
local function groupTakeFull(groups, items, group, size, wait)
  local count = redis.call('ZCARD', items)
  local n = count - count % size
  if n == 0 then return {}, nil end
  local taken = redis.call('ZPOPMIN', items, n)
  return taken, groupRelist(groups, items, group, wait, false)
end

-- Announces `deadline` (the group's) on `wake` when the group is the
-- earliest waiting one: the flusher then sleeps until it.
local function groupAnnounce(groups, group, deadline, wake)
  local head = redis.call('ZRANGE', groups, 0, 0)
  if head[1] == group then redis.call('PUBLISH', wake, string.format('%d', deadline)) end
end
