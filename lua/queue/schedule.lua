--[[
schedule: add or move jobs in one queue shard (bulk: N jobs per call).

Why atomic: the job's record, its place in the due index and its removal from
the in-flight / dead sets must change together, or a worker could claim a job
whose record is half written, or a stale worker could ack the new schedule.
A schedule resets the record's token to 0, a value no claim hands out,
which fences any in-flight delivery of the same id: that worker's ack / nack /
extend then changes nothing.

Uses lua/lib/record.lua and lua/lib/due-index.lua.

KEYS[1] due         ZSET  bucket name -> lower bound (ms since epoch)
KEYS[2] dueBuckets  prefix of the bucket ZSETs (job id -> due time, ms); no
                    key of this name exists (lua/README.md, slot migration)
KEYS[3] inflight    ZSET  job id -> lease deadline (ms since epoch)
KEYS[4] jobs        HASH  job id -> record (lib/record.lua)
KEYS[5] dead        ZSET  job id -> time of death (ms since epoch)
KEYS[6] errors      HASH  job id -> last error text

ARGV[1] wake channel (published with the due time when a job becomes the head)
ARGV[2] number of jobs N
ARGV[3] mode, for every job of the call: "upsert" | "nx" (only if absent) |
        "xx" (only if pending or in flight) | "xp" (only if pending: never
        touches a delivery in progress)
ARGV[4] time kind, for every job: "at" (ms since epoch) | "in" (ms from the
        Redis clock's now)
ARGV[5] type, for every job ("" with mode xx keeps each job's type and payload)
ARGV[6] maxAttempts, for every job ("" = the job type's default)
then N triples starting at ARGV[7]: id, time (whole ms, per ARGV[4]), payload (string)

The settings shared by the whole call travel once, not once per job: a bulk
schedule is the enqueue hot path, and Redis parses every argument.

Returns { now, codes }:
  now    the Redis clock (ms) the "in" times were added to
  codes  a string of N digits, one per job in order: 1 created, 2 updated,
         3 exists (nx found the job pending or in flight), 4 not found (xx
         found no pending or in-flight job, xp no pending one), 5 dead (nx
         found the job in the dead set: it will not run unless redriven). A job with code 1 or 2 is due at its time ("at") or
         now + its time ("in"); 3, 4 and 5 wrote nothing.
Never an error reply for expected outcomes.
]]
local due, dueBuckets, inflight, jobs, dead, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
dueUse(due, dueBuckets)
local now = nowMs()
local n = tonumber(ARGV[2])
local mode, relative, typ, maxA = ARGV[3], ARGV[4] == 'in', ARGV[5], ARGV[6]
-- A new record is '0,0,' .. due .. tail .. payload.
local tail = ',' .. maxA .. ',' .. typ .. ','
local codes = {}
local headScore = dueHead()
local newHead = nil

-- Records of brand-new jobs (the bulk case) are written in batches: one HSET
-- per 1000 jobs instead of a call each. A repeated id flushes first and is
-- read again, so every job sees the writes of the ones before it.
-- seen[id] = index of the id's last occurrence; it is still in the buffer
-- when that index is past the last flush.
local bufH, seen, flushedAt = {}, {}, -1
local function flush(at)
  if #bufH > 0 then
    redis.call('HSET', jobs, unpack(bufH))
    bufH = {}
  end
  flushedAt = at
end

-- Records of all ids in one HMGET per 1000.
local known = {}
for c = 0, n - 1, 1000 do
  local ids = {}
  for i = c, math.min(c + 999, n - 1) do ids[#ids + 1] = ARGV[7 + i * 3] end
  local recs = redis.call('HMGET', jobs, unpack(ids))
  for j = 1, #ids do known[c + j] = recs[j] end
end

for i = 0, n - 1 do
  local b = 7 + i * 3
  local id, payload = ARGV[b], ARGV[b + 2]
  -- Due times stay digits (whole ms) from ARGV to the record and the index;
  -- only a delay is added up, and comparisons use numbers.
  local dueText = ARGV[b + 1]
  local due = tonumber(dueText)
  if relative then
    due = now + due
    dueText = string.format('%d', due)
  end
  local rec = known[i + 1]
  local prev = seen[id]
  if prev then
    if prev > flushedAt then flush(i - 1) end
    rec = redis.call('HGET', jobs, id)
  end
  seen[id] = i
  -- A job with a record is in exactly one of: due index, in flight, dead.
  local leased, died = false, false
  if rec then
    leased = redis.call('ZSCORE', inflight, id)
    died = not leased and redis.call('ZSCORE', dead, id)
  end
  local pending = rec and not leased and not died

  if mode == 'nx' and rec then
    codes[i + 1] = died and '5' or '3'
  elseif (mode == 'xx' and not (pending or leased)) or (mode == 'xp' and not pending) then
    codes[i + 1] = '4'
  else
    local newRec
    if typ == '' then
      -- Keep type, payload and max attempts: only the time moves.
      newRec = recordMoved(rec, dueText)
    else
      newRec = recordNew(dueText, tail, payload)
    end
    if rec then
      if pending then
        dueRemove(recordDue(rec), id)
      elseif leased then
        redis.call('ZREM', inflight, id)
      else
        redis.call('ZREM', dead, id)
      end
      redis.call('HSET', jobs, id, newRec)
      redis.call('HDEL', errors, id)
      codes[i + 1] = '2'
    else
      bufH[#bufH + 1] = id; bufH[#bufH + 1] = newRec
      codes[i + 1] = '1'
    end
    dueAdd(dueText, id)
    if #bufH >= 2000 then flush(i) end
    if headScore == nil or due < headScore then
      headScore = due; newHead = due
    end
  end
end
flush(n)

if newHead then redis.call('PUBLISH', ARGV[1], newHead) end
return { now, table.concat(codes) }
