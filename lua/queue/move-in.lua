--[[
move-in: copy jobs into their new shard, not yet claimable, during a change
of the shard count on a Redis Cluster (src/queue/producer/reshard.ts). The
old and new shards are in different slots, so a job cannot move in one
script there; it moves in three: this copy, then move-out.lua in the old
shard (the old copy goes only if unchanged), then move-settle.lua here (the
copy is filed, or taken back).

Why atomic: a copy is its record and its place among the shard's unsettled
copies (lib/pause.lua, movingKey) together, or a claim could meet a record
that is in no set, or a write could miss that the copy was the mover's.

A copy waits in no due bucket and no dead set: no claim takes it and no
redrive finds it, so while the old shard still has the job it runs from there
only. A schedule or cancel of the job here takes it out of the copies (and
writes or deletes it), which tells move-settle.lua it is no longer the
mover's. A job this shard already has, other than as such a copy, is not
copied: producers write only here while jobs move, so it is the later write.

Uses lua/lib/record.lua, chunk.lua, records.lua, due-index.lua and pause.lua.

KEYS[1] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[2] records       HASH  the record groups' level, split pointer and count
KEYS[3] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[4] errors        HASH  job id -> last error text
KEYS[5] paused        HASH  (not read here)
KEYS[6] parked        prefix of the parked ZSETs and of the unsettled copies (no such key)

ARGV[1] "1": records go to the record groups; "0": to the jobs HASH (as schedule's ARGV[7])
ARGV[2] the mover's generation
then quadruples from ARGV[3]: id, record (as the old shard holds it), 0 for a
pending job or its time of death (ms) for a dead one, last error ("" none)

Returns a string of one digit per job: 1 copied, 2 the shard has the job
(not copied); or '-' when the shard belongs to a later mover (nothing done).
]]
recUse(KEYS[1], KEYS[2], KEYS[3])
pauseUse(KEYS[5], KEYS[6])
if not moverIs(ARGV[2]) then return '-' end
recSetGrouped(ARGV[1] == '1')
local errors, moving = KEYS[4], movingKey()
local n = (#ARGV - 2) / 4
recMakeRoom(n)
local out = {}
for i = 0, n - 1 do
  local b = 3 + i * 4
  local id, rec, died, err = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
  local have, key = recGet(id)
  if have and not redis.call('ZSCORE', moving, id) then
    out[#out + 1] = '2'
  else
    -- No record, or the mover's own copy from a run that stopped: written (again).
    if have then recPut(key, id, rec) else recAdd(id, rec) end
    redis.call('ZADD', moving, died, id)
    if err ~= '' then redis.call('HSET', errors, id, err) end
    out[#out + 1] = '1'
  end
end
recDone()
return table.concat(out)
