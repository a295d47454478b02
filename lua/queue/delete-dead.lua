--[[
delete-dead: drop jobs from the dead set for good (only dead ones: a job that
was redriven or rescheduled in the meantime is left alone).

Why atomic: the membership check and the deletes must be one step, or a job
redriven between them would lose its record while sitting in due.

KEYS[1] jobs    HASH
KEYS[2] dead    ZSET
KEYS[3] errors  HASH

ARGV: job ids

Returns the number of jobs deleted.
]]
local jobs, dead, errors = KEYS[1], KEYS[2], KEYS[3]
local deleted = 0
for _, id in ipairs(ARGV) do
  if redis.call('ZREM', dead, id) == 1 then
    redis.call('HDEL', jobs, id)
    redis.call('HDEL', errors, id)
    deleted = deleted + 1
  end
end
return deleted
