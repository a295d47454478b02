--[[
delete-dead: drop jobs from the dead set for good (only dead ones: a job that
was redriven or rescheduled in the meantime is left alone).

Why atomic: the membership check and the deletes must be one step, or a job
redriven between them would lose its record while sitting in due.

KEYS[1] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[2] records       HASH  the record groups' level, split pointer and count
KEYS[3] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[4] dead          ZSET
KEYS[5] errors        HASH

ARGV: job ids

Returns the number of jobs deleted.
]]
local dead, errors = KEYS[4], KEYS[5]
recUse(KEYS[1], KEYS[2], KEYS[3])
local deleted = 0
for _, id in ipairs(ARGV) do
  if redis.call('ZREM', dead, id) == 1 then
    recRemove(id)
    redis.call('HDEL', errors, id)
    deleted = deleted + 1
  end
end
recDone()
return deleted
