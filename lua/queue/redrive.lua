--[[
redrive: move dead jobs back to due (now), with their attempts reset, either
one by id or up to a bound of the oldest.

Why atomic: leaving the dead set and re-entering due with a fresh record must
be one step, or the job could be in neither set.

Uses lua/lib/record.lua, chunk.lua, records.lua and due-index.lua.

KEYS[1] due           ZSET  bucket name -> lower bound (ms)
KEYS[2] dueBuckets    prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[4] records       HASH  the record groups' level, split pointer and count
KEYS[5] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[6] dead          ZSET  job id -> time of death (ms)

ARGV[1] wake channel
ARGV[2] "one" | "all"
ARGV[3] job id for "one"; max count for "all"

Returns the number of jobs redriven. The last error stays in the errors hash
until the job is acked, so an operator can still see why it died.
]]
local due, dueBuckets, dead = KEYS[1], KEYS[2], KEYS[6]
dueUse(due, dueBuckets)
recUse(KEYS[3], KEYS[4], KEYS[5])
local now = nowMs()
local nowText = string.format('%d', now)
local ids
if ARGV[2] == 'one' then
  ids = { ARGV[3] }
else
  ids = redis.call('ZRANGE', dead, 0, tonumber(ARGV[3]) - 1)
end
recMakeRoom(#ids)
local count = 0
for _, id in ipairs(ids) do
  local rec, key = recGet(id, true)
  local moved = rec and recordMoved(rec, nowText)
  if moved and redis.call('ZREM', dead, id) == 1 then
    recPut(key, id, moved)
    dueAdd(nowText, id, recordPriority(moved))
    count = count + 1
  end
end
recDone()
if count > 0 then redis.call('PUBLISH', ARGV[1], now) end
return count
