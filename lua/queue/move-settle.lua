--[[
move-settle: file the mover's copies in their new shard, or take them back,
during a change of the shard count on a Redis Cluster (step three of three;
lua/queue/move-in.lua tells why three).

Why atomic: a copy leaves the unsettled copies and enters its due bucket or
the dead set in one step, or a claim could miss it for good.

Only a copy still the mover's (still among the unsettled copies: no schedule
or cancel touched it here) is settled. Removed from the old shard
(move-out.lua answered 1): filed, a pending job in its due bucket at its due
time and priority, a dead one in the dead set at its time of death. Kept
there (0): the copy is deleted with its error text; the job moves in a later
pass. A copy something else wrote or cancelled is left to that write. Only
the shard's owning mover settles (queue/move-fence.lua).

Uses lua/lib/record.lua, chunk.lua, records.lua, due-index.lua and pause.lua.

KEYS[1] due           ZSET  bucket name -> lower bound (ms)
KEYS[2] dueBuckets    prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[4] records       HASH  the record groups' level, split pointer and count
KEYS[5] recordGroups  prefix of the record groups (no such key)
KEYS[6] dead          ZSET  job id -> time of death (ms)
KEYS[7] errors        HASH  job id -> last error text
KEYS[8] paused        HASH  (not read here)
KEYS[9] parked        prefix of the parked ZSETs and of the unsettled copies (no such key)

ARGV[1] wake channel (published with the earliest due time filed when it is the new head)
ARGV[2] the mover's generation
then pairs from ARGV[3]: id, 1 (the old shard removed it: file it) or 0 (it kept it: take the copy back)

Returns { filed, takenBack }; { -1, -1 } when the shard belongs to a later
mover (nothing done).
]]
local dead, errors = KEYS[6], KEYS[7]
dueUse(KEYS[1], KEYS[2])
recUse(KEYS[3], KEYS[4], KEYS[5])
pauseUse(KEYS[8], KEYS[9])
if not moverIs(ARGV[2]) then return { -1, -1 } end
local moving = movingKey()
local head = dueHead()
local newHead = nil
local filed, takenBack = 0, 0
for i = 3, #ARGV, 2 do
  local id, gone = ARGV[i], ARGV[i + 1] == '1'
  local died = redis.call('ZSCORE', moving, id)
  if died then
    redis.call('ZREM', moving, id)
    local rec, key = recGet(id)
    if rec and gone then
      if tonumber(died) > 0 then
        redis.call('ZADD', dead, died, id)
      else
        local due = recordDue(rec)
        dueAdd(due, id, recordPriority(rec))
        if head == nil or tonumber(due) < head then
          head = tonumber(due); newHead = due
        end
      end
      filed = filed + 1
    elseif rec then
      recDelete(key, id)
      redis.call('HDEL', errors, id)
      takenBack = takenBack + 1
    end
  end
end
recDone()
if newHead then redis.call('PUBLISH', ARGV[1], newHead) end
return { filed, takenBack }
