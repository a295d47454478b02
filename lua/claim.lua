--[[
claim: hand due jobs to a worker under a lease, after returning jobs whose
lease expired (their worker died or hung) to the due index.

Why atomic: moving a job from due to in-flight and giving it a new generation
(the fencing token) must be one step, or two workers could take the same job,
or a job could sit in neither set and be lost.

Tokens come from a per-shard sequence, never from the record alone: job ids
are reused business keys, so a cancelled and re-created job must not hand out
a token that an old delivery of the same id still holds.

Uses lua/lib/due-index.lua.

KEYS[1] due index     ZSET  bucket name -> lower bound (ms)
KEYS[2] due buckets   prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] seq           STRING  last token handed out in this shard
KEYS[4] inflight      ZSET  job id -> lease deadline (ms)
KEYS[5] jobs          HASH  job id -> record "gen,attempts,due,maxAttempts,type,payload"
KEYS[6] errors        HASH  job id -> last error text
KEYS[7] dead          ZSET  job id -> time of death (ms); corrupt records go here

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
local seq, inflight, jobs, errors, dead = KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
dueUse(KEYS[1], KEYS[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local maxClaim, lease, maxReclaim = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

-- Variadic commands in chunks: one call per chunk instead of one per job, and
-- well under Lua's limit on unpacked arguments.
local CHUNK = 1000
local function callChunked(cmd, key, items, stride)
  for i = 1, #items, CHUNK * stride do
    redis.call(cmd, key, unpack(items, i, math.min(i + CHUNK * stride - 1, #items)))
  end
end

-- Expired leases go back to the due index at the due time of their delivery
-- (in the past, so they are claimed first); the attempt they used stays
-- counted, so a job that keeps killing its workers ends in the dead set.
local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, maxReclaim)
if #expired > 0 then
  local recs = redis.call('HMGET', jobs, unpack(expired))
  local errArgs, deadArgs = {}, {}
  callChunked('ZREM', inflight, expired, 1)
  for i, id in ipairs(expired) do
    local due = recs[i] and recordDue(recs[i])
    if due then
      dueAdd(due, id)
      errArgs[#errArgs + 1] = id
      errArgs[#errArgs + 1] = 'lease expired: the worker holding the job stopped answering'
    elseif recs[i] then
      deadArgs[#deadArgs + 1] = now; deadArgs[#deadArgs + 1] = id
      errArgs[#errArgs + 1] = id; errArgs[#errArgs + 1] = 'corrupt job record'
    end
    -- An in-flight entry without a record cannot be run; dropping it is the repair.
  end
  callChunked('ZADD', dead, deadArgs, 2)
  callChunked('HSET', errors, errArgs, 2)
end

local out = { now, -1, -1, #expired }
if maxClaim > 0 then
  local ids = dueTake(string.format('%d', now), maxClaim)
  local n = #ids
  if n > 0 then
    local recs = {}
    for i = 1, n, CHUNK do
      local part = redis.call('HMGET', jobs, unpack(ids, i, math.min(i + CHUNK - 1, n)))
      for _, r in ipairs(part) do recs[#recs + 1] = r end
    end
    -- HMGET leaves false for a missing record: recs[i] pairs with ids[i].
    -- The deadline is made a string once: Redis would convert the number per job.
    local deadline = string.format('%d', now + lease)
    local token = redis.call('INCRBY', seq, n) - n
    local hset, zadd, deadArgs, errArgs = {}, {}, {}, {}
    for i = 1, n do
      local id, rec = ids[i], recs[i]
      token = token + 1
      if rec then
        -- "gen,attempts,due,rest" -> "token,attempts+1,due,rest" with plain
        -- finds: this loop is the hottest code of the queue.
        local c1 = string.find(rec, ',', 1, true)
        local c2 = c1 and string.find(rec, ',', c1 + 1, true)
        local c3 = c2 and string.find(rec, ',', c2 + 1, true)
        local a = c3 and tonumber(string.sub(rec, c1 + 1, c2 - 1))
        if a then
          local due = string.sub(rec, c2 + 1, c3 - 1)
          -- %d, not tostring: Lua prints numbers with "%.14g", a slow path.
          rec = string.format('%d,%d', token, a + 1) .. string.sub(rec, c2)
          hset[#hset + 1] = id; hset[#hset + 1] = rec
          zadd[#zadd + 1] = deadline; zadd[#zadd + 1] = id
          out[#out + 1] = id; out[#out + 1] = due; out[#out + 1] = rec
        else
          -- Unreadable record: park it with the dead instead of failing the whole batch.
          deadArgs[#deadArgs + 1] = now; deadArgs[#deadArgs + 1] = id
          errArgs[#errArgs + 1] = id; errArgs[#errArgs + 1] = 'corrupt job record'
        end
      end
      -- A due entry without a record cannot be run; taking it out is the repair.
    end
    callChunked('HSET', jobs, hset, 2)
    callChunked('ZADD', inflight, zadd, 2)
    callChunked('ZADD', dead, deadArgs, 2)
    callChunked('HSET', errors, errArgs, 2)
  end
end

local head = dueHead()
if head then out[2] = head end
local lhead = redis.call('ZRANGE', inflight, '0', '0', 'WITHSCORES')
if lhead[2] then out[3] = tonumber(lhead[2]) end
return out
