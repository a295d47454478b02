--[[
schedule: add or move jobs in one queue shard (bulk: N jobs per call).

Why atomic: the job's record, its place in the due index and its removal from
the in-flight / dead sets must change together, or a worker could claim a job
whose record is half written, or a stale worker could ack the new schedule.
A schedule resets the record's token to 0, a value no claim hands out,
which fences any in-flight delivery of the same id: that worker's ack / nack /
extend then changes nothing.

A pending job may be parked (its type paused: lua/lib/pause.lua); it is
moved out of its parked ZSET as it would be out of its bucket, and filed in
the due buckets again (a claim parks it again while its type stays paused).

Uses lua/lib/record.lua, records.lua, due-index.lua and pause.lua.

KEYS[1] due           ZSET  bucket name -> lower bound (ms since epoch)
KEYS[2] dueBuckets    prefix of the bucket ZSETs (job id -> due time, ms); no
                      key of this name exists (lua/README.md, slot migration)
KEYS[3] inflight      ZSET  job id -> lease deadline (ms since epoch)
KEYS[4] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[5] records       HASH  the record groups' level, split pointer and count
KEYS[6] recordGroups  prefix of the record groups (HASH job id -> record; no
                      key of this name exists)
KEYS[7] dead          ZSET  job id -> time of death (ms since epoch)
KEYS[8] errors        HASH  job id -> last error text
KEYS[9] paused        HASH  '*' or job type -> ms paused at (not read here)
KEYS[10] parked       prefix of the parked ZSETs, one per type (no such key)

ARGV[1] wake channel (published with the due time when a job becomes the head)
ARGV[2] number of jobs N
ARGV[3] mode, for every job of the call: "upsert" | "nx" (only if absent) |
        "xx" (only if pending or in flight) | "xp" (only if pending: never
        touches a delivery in progress)
ARGV[4] time kind, for every job: "at" (ms since epoch) | "in" (ms from the
        Redis clock's now)
ARGV[5] type, for every job ("" with mode xx keeps each job's type and payload)
ARGV[6] maxAttempts, for every job ("" = the job type's default)
ARGV[7] "1": new records go to the record groups; "0": to the jobs HASH, where
        builds before the groups read them (a rolling upgrade)
ARGV[8] priority, for every job: a digit 0..9 ("" = 5, the default); it picks
        the job's lane (lib/due-index.lua); ignored when ARGV[5] is "" (a
        move keeps each job's priority)
ARGV[9] layout epoch the caller acts on (whole number; shard-layout.ts): a
        shard fenced with a later one (field e of KEYS[5], written by the
        mover of a change of the shard count before producers switch shards)
        refuses the call, so a writer still on the old layout cannot put a
        job where no one looks for it
then N triples starting at ARGV[10]: id, time (whole ms, per ARGV[4]), payload (string)

The settings shared by the whole call travel once, not once per job: a bulk
schedule is the enqueue hot path, and Redis parses every argument.

Returns { now, codes }:
  now    the Redis clock (ms) the "in" times were added to
  codes  a string of N digits, one per job in order: 1 created, 2 updated,
         3 exists (nx found the job pending or in flight), 4 not found (xx
         found no pending or in-flight job, xp no pending one), 5 dead (nx
         found the job in the dead set, or a dead job's copy a change of the
         shard count has not settled: it will not run unless redriven). A
         job with code 1 or 2 is due at its time ("at") or
         now + its time ("in"); 3, 4 and 5 wrote nothing. 6 for every job:
         the shard's layout epoch is later than ARGV[9]; nothing written (the
         caller reads the layout again and retries).
Never an error reply for expected outcomes.
]]
local now = nowMs()
local n = tonumber(ARGV[2])
-- The fence of a change of the shard count: one HGET, absent while none ran.
if tonumber(redis.call('HGET', KEYS[5], 'e') or '0') > tonumber(ARGV[9]) then
  return { now, string.rep('6', n) }
end
local due, dueBuckets, inflight, dead, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[7], KEYS[8]
dueUse(due, dueBuckets)
recUse(KEYS[4], KEYS[5], KEYS[6])
pauseUse(KEYS[9], KEYS[10])
local mode, relative, typ, maxA = ARGV[3], ARGV[4] == 'in', ARGV[5], ARGV[6]
recSetGrouped(ARGV[7] == '1')
recMakeRoom(n)
-- A new record is '0,0,' .. due .. tail .. payload.
local tail = recordTail(maxA, ARGV[8], typ)
local codes = {}
local headScore = dueHead()
local newHead = nil

-- The records of all ids, read before the first write. An id seen earlier in
-- the call is read again, so every job sees the writes of the ones before it.
local ids = {}
for i = 0, n - 1 do ids[i + 1] = ARGV[10 + i * 3] end
local known, knownKeys = recGetMany(ids, 1, n)
local seen = {}

for i = 0, n - 1 do
  local b = 10 + i * 3
  local id, payload = ARGV[b], ARGV[b + 2]
  -- Due times stay digits (whole ms) from ARGV to the record and the index;
  -- only a delay is added up, and comparisons use numbers.
  local dueText = ARGV[b + 1]
  local due = tonumber(dueText)
  if relative then
    due = now + due
    dueText = string.format('%d', due)
  end
  -- key: where the record is, or for a job without one the key of its group.
  local rec, key = known[i + 1], knownKeys[i + 1]
  if seen[id] then
    rec, key = recGet(id)
    key = key or recGroup(id)
  end
  seen[id] = true
  -- A job with a record is in exactly one of: due index, parked, in flight, dead.
  local leased, died = false, false
  if rec then
    leased = redis.call('ZSCORE', inflight, id)
    -- (or a dead job's copy a change of the shard count has not settled: dead too)
    died = not leased and (redis.call('ZSCORE', dead, id) or movingDead(id))
  end
  local pending = rec and not leased and not died

  if mode == 'nx' and rec then
    codes[i + 1] = died and '5' or '3'
  elseif (mode == 'xx' and not (pending or leased)) or (mode == 'xp' and not pending) then
    codes[i + 1] = '4'
  else
    local newRec
    if pending and not recordDue(rec) then
      -- Unreadable while pending: its bucket is unknown, so it cannot be
      -- moved; left as it is for a claim to park (answered as not found).
      newRec = nil
    elseif typ == '' then
      -- Keep type, payload and max attempts: only the time moves (nil for
      -- an unreadable record: it is left as it is, for a claim to park).
      newRec = recordMoved(rec, dueText)
    else
      newRec = recordNew(dueText, tail, payload)
    end
    if not newRec then
      codes[i + 1] = '4'
    else
      if rec then
        if pending then
          pendingRemove(rec, id)
        elseif leased then
          redis.call('ZREM', inflight, id)
        elseif redis.call('ZREM', dead, id) == 0 then
          redis.call('ZREM', movingKey(), id)
        end
        recPut(key, id, newRec)
        redis.call('HDEL', errors, id)
        codes[i + 1] = '2'
      else
        recAdd(id, newRec, key)
        codes[i + 1] = '1'
      end
      dueAdd(dueText, id, recordPriority(newRec))
      if headScore == nil or due < headScore then
        headScore = due; newHead = due
      end
    end
  end
end
recDone()

if newHead then redis.call('PUBLISH', ARGV[1], newHead) end
return { now, table.concat(codes) }
