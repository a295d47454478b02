--[[
move-out: remove jobs from their old shard if they are still as the mover
copied them, during a change of the shard count on a Redis Cluster (step two
of three; lua/queue/move-in.lua tells why three).

Why atomic: the comparison and the removal must be one step, or a claim, a
reschedule or a cancel between them would be undone (a job claimed after the
look would lose its record while in flight).

A job goes only if its record is the text the mover read and it is still in
the state the mover read (pending: in its due bucket or parked; dead: in the
dead set at its time of death). Anything else (claimed, rescheduled,
cancelled, redriven meanwhile) keeps it here, and move-settle.lua takes the
copy back. A job removed leaves its id among the shard's moved-out jobs
(lib/pause.lua, movedOutKey), in the same step: a mover settling the copies
of one that stopped files a copy only on that proof, since a job gone from
here for any other reason (run, cancelled) must not run again from there.
Only the shard's owning mover removes (queue/move-fence.lua).

Uses lua/lib/record.lua, chunk.lua, records.lua, due-index.lua and pause.lua.

KEYS[1] due           ZSET  bucket name -> lower bound (ms)
KEYS[2] dueBuckets    prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight      ZSET  job id -> lease deadline (ms)
KEYS[4] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[5] records       HASH  the record groups' level, split pointer and count
KEYS[6] recordGroups  prefix of the record groups (no such key)
KEYS[7] dead          ZSET  job id -> time of death (ms)
KEYS[8] errors        HASH  job id -> last error text
KEYS[9] paused        HASH  (not read here)
KEYS[10] parked       prefix of the parked ZSETs, one per type (no such key)

ARGV[1] the mover's generation
then triples from ARGV[2]: id, record (as copied), 0 for a pending job or its time of death (ms)

Returns a string of one digit per job: 1 removed, 0 kept (changed or gone);
or '-' when the shard belongs to a later mover (nothing done).
]]
local inflight, dead, errors = KEYS[3], KEYS[7], KEYS[8]
dueUse(KEYS[1], KEYS[2])
recUse(KEYS[4], KEYS[5], KEYS[6])
pauseUse(KEYS[9], KEYS[10])
local gen = ARGV[1]
if not moverIs(gen) then return '-' end
local movedOut = movedOutKey()
local out = {}
for i = 2, #ARGV, 3 do
  local id, copied, died = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local rec, key = recGet(id, died ~= '0')
  local same = rec == copied and not redis.call('ZSCORE', inflight, id)
  if same and died ~= '0' then
    local at = redis.call('ZSCORE', dead, id)
    same = at ~= false and tonumber(at) == tonumber(died) and redis.call('ZREM', dead, id) == 1
  elseif same then
    same = not redis.call('ZSCORE', dead, id) and pendingRemove(rec, id)
  end
  if same then
    recDelete(key, id)
    redis.call('HDEL', errors, id)
    redis.call('ZADD', movedOut, gen, id)
    out[#out + 1] = '1'
  else
    out[#out + 1] = '0'
  end
end
recDone()
return table.concat(out)
