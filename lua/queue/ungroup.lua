--[[
ungroup: move job records out of the record groups into the jobs HASH, a
bounded number of groups per call, for a rollback to a build that reads only
the jobs HASH (docs/operations.md, Upgrading). Nothing else changes: every job keeps its
record (now in the jobs HASH) and its place in the due index, in flight or
dead. Safe while the service runs, as long as every process runs with
QUEUE_RECORD_GROUPS=0 (one with 1 would move records back as it writes them).

Uses lua/lib/chunk.lua and records.lua.

KEYS[1] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[2] records       HASH  the record groups' level, split pointer and count
KEYS[3] recordGroups  prefix of the record groups (no such key; lua/README.md)

ARGV[1] the group to go on from, counting down ("" for the last one)
ARGV[2] most groups to empty in this call

Returns { moved, next }: the records moved, and the group the next call goes
on from; next is -1 when the groups are empty and their state is gone, -2
when records are counted but none is left below the cursor (a process with
QUEUE_RECORD_GROUPS=1 wrote some meanwhile, or split): start again from the
top.
]]
recUse(KEYS[1], KEYS[2], KEYS[3])
recSetGrouped(false)
local g = ARGV[1] == '' and (2 ^ recLevel + recSplit - 1) or tonumber(ARGV[1])
local moved, steps = 0, 0
while g >= 0 and steps < tonumber(ARGV[2]) and recGroupsInUse() do
  local key = recPrefix .. string.format('%d', g)
  local all = redis.call('HGETALL', key)
  if #all > 0 then
    callChunked('HSET', recLegacy, all, 2)
    redis.call('DEL', key)
    recDelta = recDelta - #all / 2
    moved = moved + #all / 2
  end
  g = g - 1
  steps = steps + 1
end
if not recGroupsInUse() then
  -- No record left in a group: the state goes too, as if groups had never been
  -- on; the shard's layout epoch (e, queue/layout-fence.lua) stays, or a
  -- process writing by an older layout would get through the fence again.
  redis.call('HDEL', recMeta, 'l', 'p', 'n', 'g')
  return { moved, -1 }
end
recDone()
if g < 0 then return { moved, -2 } end
return { moved, g }
