--[[
move: take jobs out of their old queue shard and file them in their new one,
while a change of the shard count runs (src/queue/producer/reshard.ts).

Why atomic: a job must be in exactly one place whenever a producer, a claim
or a cancel looks: taken out of the old shard and filed in the new one in
one step, it is never in both (two deliveries) nor in neither (a cancel that
finds nothing, then the job turns up again). The two shards carry two hash
tags, so this runs on one Redis server only: a Redis Cluster refuses it
(CROSSSLOT), and the mover says so before it starts.

A job in flight stays where it is; its ack ends it there, and a nack, a
release or its lease's expiry puts it back in the old shard's due buckets,
from where a later call moves it. A job the new shard already has stays
there and the old copy is dropped: while jobs move, producers write only to
the new shard, so the copy there is the later write. A pending job (in its
due bucket, or parked while its type is paused) is filed in the new shard's
due buckets at its due time, in its priority's lane (a claim there parks it
again while its type stays paused); a dead one goes to the new dead set at
its time of death. The record moves as it is (token, attempts, payload), with
its last error.

Uses lua/lib/record.lua, chunk.lua, records.lua, due-index.lua and pause.lua;
records.lua and due-index.lua are pointed at one shard, then the other.

KEYS[1] due           ZSET  old shard: bucket name -> lower bound (ms)
KEYS[2] dueBuckets    old shard: prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight      ZSET  old shard: job id -> lease deadline (ms)
KEYS[4] jobs          HASH  old shard: job id -> record: the long ones (lib/records.lua)
KEYS[5] records       HASH  old shard: the record groups' level, split pointer and count
KEYS[6] recordGroups  old shard: prefix of the record groups (no such key)
KEYS[7] dead          ZSET  old shard: job id -> time of death (ms)
KEYS[8] errors        HASH  old shard: job id -> last error text
KEYS[9] paused        HASH  old shard: '*' or job type -> ms paused at (not read here)
KEYS[10] parked       old shard: prefix of the parked ZSETs, one per type (no such key)
KEYS[11] toDue        ZSET  new shard: bucket name -> lower bound (ms)
KEYS[12] toDueBuckets new shard: prefix of the bucket ZSETs (no such key)
KEYS[13] toJobs       HASH  new shard: job id -> record: the long ones
KEYS[14] toRecords    HASH  new shard: the record groups' level, split pointer and count
KEYS[15] toRecordGroups new shard: prefix of the record groups (no such key)
KEYS[16] toDead       ZSET  new shard: job id -> time of death (ms)
KEYS[17] toErrors     HASH  new shard: job id -> last error text

ARGV[1] wake channel of the new shard (published with the earliest due time
        moved when it is the new shard's head)
ARGV[2] "1": records go to the new shard's record groups; "0": to its jobs
        HASH (as schedule's ARGV[7])
ARGV[3..] job ids, every one of them hashed to this new shard

Returns { moved, inFlight, dropped, stuck }:
  moved     jobs taken out of the old shard and filed in the new one
  inFlight  jobs left in flight in the old shard (to move after their lease)
  dropped   old copies removed because the new shard had the job
  stuck     jobs with a record but in no set a script can find them by
            (an unreadable pending record: only after a hand edit), left alone
Ids without a record in the old shard count in none.
]]
local inflight, dead, errors = KEYS[3], KEYS[7], KEYS[8]
local toDead, toErrors = KEYS[16], KEYS[17]

-- Out of the old shard.
dueUse(KEYS[1], KEYS[2])
recUse(KEYS[4], KEYS[5], KEYS[6])
pauseUse(KEYS[9], KEYS[10])
local taken = {}
local inFlight, stuck = 0, 0
for i = 3, #ARGV do
  local id = ARGV[i]
  if redis.call('ZSCORE', inflight, id) then
    inFlight = inFlight + 1
  else
    local diedAt = redis.call('ZSCORE', dead, id)
    local rec, key = recGet(id, diedAt ~= false)
    if rec and (diedAt or pendingRemove(rec, id)) then
      if diedAt then redis.call('ZREM', dead, id) end
      recDelete(key, id)
      local err = redis.call('HGET', errors, id)
      if err then redis.call('HDEL', errors, id) end
      taken[#taken + 1] = { id, rec, diedAt, err }
    elseif rec then
      stuck = stuck + 1
    end
  end
end
recDone()

-- Into the new one.
dueUse(KEYS[11], KEYS[12])
recUse(KEYS[13], KEYS[14], KEYS[15])
recSetGrouped(ARGV[2] == '1')
recMakeRoom(#taken)
local head = dueHead()
local newHead = nil
local moved, dropped = 0, 0
for _, t in ipairs(taken) do
  local id, rec, diedAt, err = t[1], t[2], t[3], t[4]
  if recGet(id) then
    dropped = dropped + 1
  else
    recAdd(id, rec)
    if diedAt then
      redis.call('ZADD', toDead, diedAt, id)
    else
      local due = recordDue(rec)
      dueAdd(due, id, recordPriority(rec))
      if head == nil or tonumber(due) < head then
        head = tonumber(due); newHead = due
      end
    end
    if err then redis.call('HSET', toErrors, id, err) end
    moved = moved + 1
  end
end
recDone()

if newHead then redis.call('PUBLISH', ARGV[1], newHead) end
return { moved, inFlight, dropped, stuck }
