--[[
schedule: add or move jobs in one queue shard (bulk: N jobs per call).

Why atomic: the job's record, its place in the due ZSET and its removal from
the in-flight / dead sets must change together, or a worker could claim a job
whose record is half written, or a stale worker could ack the new schedule.
A schedule resets the record's generation to 0, a value no claim hands out,
which fences any in-flight delivery of the same id: that worker's ack / nack /
extend then changes nothing.

KEYS[1] due       ZSET  job id -> due time (ms since epoch)
KEYS[2] inflight  ZSET  job id -> lease deadline (ms since epoch)
KEYS[3] jobs      HASH  job id -> record "gen,attempts,maxAttempts,type,payload"
                        (gen: token of the current delivery, 0 when not in flight)
KEYS[4] dead      ZSET  job id -> time of death (ms since epoch)
KEYS[5] errors    HASH  job id -> last error text

ARGV[1] wake channel (published with the due time when a job becomes the head)
ARGV[2] number of jobs N
ARGV[3] mode, for every job of the call: "upsert" | "nx" (only if absent) |
        "xx" (only if pending or in flight) | "xp" (only if pending: never
        touches a delivery in progress)
ARGV[4] time kind, for every job: "at" (ms since epoch) | "in" (ms from the
        Redis clock's now)
ARGV[5] type, for every job ("" with mode xx keeps each job's type and payload)
ARGV[6] maxAttempts, for every job ("" = the job type's default)
then N triples starting at ARGV[7]: id, time (ms, per ARGV[4]), payload (string)

The settings shared by the whole call travel once, not once per job: a bulk
schedule is the enqueue hot path, and Redis parses every argument.

Returns { now, codes }:
  now    the Redis clock (ms) the "in" times were added to
  codes  a string of N digits, one per job in order: 1 created, 2 updated,
         3 exists (nx found the job), 4 not found (xx found no pending or
         in-flight job, xp no pending one). A job with code 1 or 2 is due at its time ("at") or
         now + its time ("in"); 3 and 4 wrote nothing.
Never an error reply for expected outcomes.
]]
local due, inflight, jobs, dead, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[2])
local mode, relative, typ, maxA = ARGV[3], ARGV[4] == 'in', ARGV[5], ARGV[6]
local fresh = '0,0,' .. maxA .. ',' .. typ .. ','
local codes = {}
local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
local headScore = head[2] and tonumber(head[2]) or nil
local newHead = nil

-- Brand-new jobs (the bulk case) are written in batches: one HSET and one ZADD
-- per 1000 jobs instead of a call each. A repeated id flushes first and is
-- read again, so every job sees the writes of the ones before it.
-- seen[id] = index of the id's last occurrence; it is still in the buffers
-- when that index is past the last flush.
local bufH, bufZ, seen, flushedAt = {}, {}, {}, -1
local function flush(at)
  if #bufH > 0 then
    redis.call('HSET', jobs, unpack(bufH))
    redis.call('ZADD', due, unpack(bufZ))
    bufH, bufZ = {}, {}
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
  -- The score goes to ZADD as given (an absolute time stays the caller's
  -- string); the number is only for the head check.
  local dueAt, score = ARGV[b + 1], nil
  if relative then
    score = now + tonumber(dueAt); dueAt = score
  else
    score = tonumber(dueAt)
  end
  local rec = known[i + 1]
  local prev = seen[id]
  if prev then
    if prev > flushedAt then flush(i - 1) end
    rec = redis.call('HGET', jobs, id)
  end
  seen[id] = i
  local pending, live, newRec = false, false, nil
  if rec then
    pending = redis.call('ZSCORE', due, id)
    live = pending or redis.call('ZSCORE', inflight, id)
    if typ == '' then
      -- Keep type, payload and max attempts: only the time moves.
      newRec = '0,0,' .. string.match(rec, '^%d+,%d+,(.*)$')
    end
  end

  if mode == 'nx' and rec then
    codes[i + 1] = '3'
  elseif (mode == 'xx' and not live) or (mode == 'xp' and not pending) then
    codes[i + 1] = '4'
  else
    newRec = newRec or (fresh .. payload)
    if rec then
      redis.call('HSET', jobs, id, newRec)
      redis.call('ZREM', inflight, id)
      redis.call('ZREM', dead, id)
      redis.call('HDEL', errors, id)
      redis.call('ZADD', due, dueAt, id)
      codes[i + 1] = '2'
    else
      bufH[#bufH + 1] = id; bufH[#bufH + 1] = newRec
      bufZ[#bufZ + 1] = dueAt; bufZ[#bufZ + 1] = id
      if #bufH >= 2000 then flush(i) end
      codes[i + 1] = '1'
    end
    if headScore == nil or score < headScore then
      headScore = score; newHead = score
    end
  end
end
flush(n)

if newHead then redis.call('PUBLISH', ARGV[1], newHead) end
return { now, table.concat(codes) }
