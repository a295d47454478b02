--[[
claim: hand due jobs to a worker under a lease, after returning jobs whose
lease expired (their worker died or hung) to the due set.

Why atomic: moving a job from due to in-flight and giving it a new generation
(the fencing token) must be one step, or two workers could take the same job,
or a job could sit in neither set and be lost.

Tokens come from a per-shard sequence, never from the record alone: job ids
are reused business keys, so a cancelled and re-created job must not hand out
a token that an old delivery of the same id still holds.

KEYS[1] due       ZSET  job id -> due time (ms)
KEYS[2] inflight  ZSET  job id -> lease deadline (ms)
KEYS[3] jobs      HASH  job id -> record "gen,attempts,maxAttempts,type,payload"
KEYS[4] errors    HASH  job id -> last error text
KEYS[5] seq       STRING  last token handed out in this shard
KEYS[6] dead      ZSET  job id -> time of death (ms); corrupt records go here

ARGV[1] max jobs to claim (>= 0)
ARGV[2] lease length (ms)
ARGV[3] max expired leases to return to due in this call

Returns { now, nextDue, nextLease, reclaimed, id1, due1, rec1, id2, ... }
  now        Redis clock (ms) when the claim ran
  nextDue    due time (ms) of the earliest job still pending, -1 if none
  nextLease  earliest lease deadline (ms) in flight after this claim, -1 if none
  reclaimed  how many expired leases were returned to due
  then three entries per claimed job: id, its due time (ms), its record after
  the claim (attempts incremented, generation set to a fresh token from seq:
  the token the worker must present to ack / nack / extend).
]]
local due, inflight, jobs, errors, seq, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local maxClaim, lease, maxReclaim = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

-- Variadic commands in chunks: one call per chunk instead of one per job, and
-- well under Lua's limit on unpacked arguments.
local CHUNK = 1000
local function callChunked(cmd, key, head, items, stride)
  for i = 1, #items, CHUNK * stride do
    local args = { cmd, key }
    for _, h in ipairs(head) do args[#args + 1] = h end
    for j = i, math.min(i + CHUNK * stride - 1, #items) do args[#args + 1] = items[j] end
    redis.call(unpack(args))
  end
end

-- Expired leases go back to due at "now"; the attempt they used stays counted,
-- so a job that keeps killing its workers ends in the dead set.
local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, maxReclaim)
if #expired > 0 then
  local dueArgs, errArgs = {}, {}
  for _, id in ipairs(expired) do
    dueArgs[#dueArgs + 1] = now; dueArgs[#dueArgs + 1] = id
    errArgs[#errArgs + 1] = id
    errArgs[#errArgs + 1] = 'lease expired: the worker holding the job stopped answering'
  end
  callChunked('ZREM', inflight, {}, expired, 1)
  callChunked('ZADD', due, {}, dueArgs, 2)
  callChunked('HSET', errors, {}, errArgs, 2)
end

local out = { now, -1, -1, #expired }
if maxClaim > 0 then
  local ready = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'WITHSCORES', 'LIMIT', 0, maxClaim)
  local n = #ready / 2
  if n > 0 then
    -- The ready jobs are exactly the lowest ranks, so remove them in one call.
    redis.call('ZREMRANGEBYRANK', due, 0, n - 1)
    local ids = {}
    for i = 1, #ready, 2 do ids[#ids + 1] = ready[i] end
    local recs = {}
    for i = 1, n, CHUNK do
      local part = redis.call('HMGET', jobs, unpack(ids, i, math.min(i + CHUNK - 1, n)))
      for _, r in ipairs(part) do recs[#recs + 1] = r end
    end
    -- HMGET leaves false for a missing record: recs[i] pairs with ids[i].
    -- The deadline is made a string once: Redis would convert the number per job.
    local deadline = tostring(now + lease)
    local token = redis.call('INCRBY', seq, n) - n
    local hset, zadd, deadArgs, errArgs = {}, {}, {}, {}
    for i = 1, n do
      local id, rec = ids[i], recs[i]
      token = token + 1
      if rec then
        -- "gen,attempts,rest" -> "token,attempts+1,rest" with plain finds:
        -- this loop is the hottest code of the queue.
        local c1 = string.find(rec, ',', 1, true)
        local c2 = c1 and string.find(rec, ',', c1 + 1, true)
        local a = c2 and tonumber(string.sub(rec, c1 + 1, c2 - 1))
        if a then
          rec = tostring(token) .. ',' .. tostring(a + 1) .. string.sub(rec, c2)
          hset[#hset + 1] = id; hset[#hset + 1] = rec
          zadd[#zadd + 1] = deadline; zadd[#zadd + 1] = id
          out[#out + 1] = id; out[#out + 1] = ready[2 * i]; out[#out + 1] = rec
        else
          -- Unreadable record: park it with the dead instead of failing the whole batch.
          deadArgs[#deadArgs + 1] = now; deadArgs[#deadArgs + 1] = id
          errArgs[#errArgs + 1] = id; errArgs[#errArgs + 1] = 'corrupt job record'
        end
      end
      -- A due entry without a record cannot be run; popping it is the repair.
    end
    callChunked('HSET', jobs, {}, hset, 2)
    callChunked('ZADD', inflight, {}, zadd, 2)
    callChunked('ZADD', dead, {}, deadArgs, 2)
    callChunked('HSET', errors, {}, errArgs, 2)
  end
end

local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
if head[2] then out[2] = tonumber(head[2]) end
local lhead = redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')
if lhead[2] then out[3] = tonumber(lhead[2]) end
return out
