--[[
resume: lift a pause of a queue shard or of one job type in it, and move up
to a bounded number of the type's parked jobs back to the due buckets at
their due times, earliest first; called again (unpause "0") until none is
left, so a large backlog never blocks Redis for long. Publishes the earliest
due time on the wake channel so sleeping workers claim at once.

Why atomic: a parked job must leave its parked ZSET and enter its bucket in
one step, or it would be in two places or in none (lua/lib/pause.lua).
A later call (unpause "0") moves nothing while the type is paused again, so
an operator's new pause between two calls is not lifted by the first resume.

Uses lua/lib/record.lua, chunk.lua, records.lua, due-index.lua and pause.lua.

KEYS[1] due           ZSET  bucket name -> lower bound (ms)
KEYS[2] dueBuckets    prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[4] records       HASH  the record groups' level, split pointer and count
KEYS[5] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[6] paused        HASH  '*' or job type -> ms paused at
KEYS[7] parked        prefix of the parked ZSETs, one per type (no such key)

ARGV[1] wake channel
ARGV[2] '*' for the whole queue, or a job type (checked by the caller)
ARGV[3] "1": lift the pause, then move; "0": only move, unless paused again
ARGV[4] max parked jobs to move in this call (>= 0)

Returns { wasPaused, moved, left }: 1 if this call lifted a pause, else 0;
  parked jobs moved back to due; parked jobs of the type still left.
]]
dueUse(KEYS[1], KEYS[2])
recUse(KEYS[3], KEYS[4], KEYS[5])
pauseUse(KEYS[6], KEYS[7])
local field, max = ARGV[2], tonumber(ARGV[4])
local wasPaused = 0
if ARGV[3] == '1' then
  wasPaused = redis.call('HDEL', KEYS[6], field)
elseif redis.call('HEXISTS', KEYS[6], field) == 1 then
  return { 0, 0, field == '*' and 0 or redis.call('ZCARD', parkedKey(field)) }
end

local moved = 0
local left = 0
if field ~= '*' then
  local key = parkedKey(field)
  local ids = {}
  if max > 0 then ids = redis.call('ZRANGE', key, '0', string.format('%d', max - 1)) end
  if #ids > 0 then
    local recs = recGetMany(ids, 1, #ids)
    for i, id in ipairs(ids) do
      -- The record's due time files it (lib/due-index.lua I3). A parked id
      -- without a readable record could never run: dropping it is the repair.
      local due = recs[i] and recordDue(recs[i])
      if due then
        dueAdd(due, id, recordPriority(recs[i]))
        moved = moved + 1
      end
    end
    callChunked('ZREM', key, ids, 1)
  end
  left = redis.call('ZCARD', key)
end

local head = dueHead()
if head and (moved > 0 or wasPaused == 1) then redis.call('PUBLISH', ARGV[1], string.format('%d', head)) end
return { wasPaused, moved, left }
