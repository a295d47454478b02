--[[
claim: hand due jobs to a worker under a lease, after returning jobs whose
lease expired (their worker died or hung) to the due index.

Why atomic: moving a job from due to in-flight and giving it a new token
(the fencing token) must be one step, or two workers could take the same job,
or a job could sit in neither set and be lost.

Tokens are unique forever, also across a Redis that lost its latest writes
(a crash between AOF fsyncs, a failover to a replica that lagged): a token
is at least the Redis clock in ms times 1024, and above every token the
shard's seq remembers. Job ids are reused business keys, so a cancelled and
re-created job must not hand out a token that an old delivery of the same
id still holds; and after a rollback, seq alone would hand out again tokens
that workers of the lost window still hold. (Clocks of the masters a
failover moves between must agree to within the failover's duration.)

Due jobs are claimed in priority order (lib/due-index.lua, dueTake): those
overdue by more than the aging bound first, oldest first, then lane by lane
from priority 9 down to 0, earliest due first within a lane. Nothing is
claimed before its due time.

A claim carries a deadline on the Redis clock: sent on a connection to a
server that then hung, it may run long after its worker gave up on it and
closed the connection; past its deadline it changes nothing, so no job is
leased to a worker that is no longer waiting for it.

A paused queue claims nothing: only its expired leases go back to due (so
nothing stays stuck in flight), and it answers no next due time, so workers
sleep until a lease expires, their idle re-check, or resume's wake-up. The
due jobs of a paused type are parked (lib/pause.lua) instead of claimed: set
aside with their due time, so the other types' jobs behind them are claimed
and no claim meets them again. A job claimed before the pause keeps running.

Uses lua/lib/time.lua, record.lua, chunk.lua, records.lua, due-index.lua and pause.lua.

KEYS[1] due           ZSET  bucket name -> lower bound (ms)
KEYS[2] dueBuckets    prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight      ZSET  job id -> lease deadline (ms)
KEYS[4] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[5] records       HASH  the record groups' level, split pointer and count
KEYS[6] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[7] dead          ZSET  job id -> time of death (ms); corrupt records go here
KEYS[8] errors        HASH  job id -> last error text
KEYS[9] seq           STRING  last token handed out in this shard
KEYS[10] paused       HASH  '*' or job type -> ms paused at (lib/pause.lua)
KEYS[11] parked       prefix of the parked ZSETs, one per type (no such key)

ARGV[1] max jobs to claim (>= 0)
ARGV[2] lease length (ms)
ARGV[3] max expired leases to return to due in this call
ARGV[4] deadline (ms since epoch, Redis clock): past it the claim does nothing;
        "" for none
ARGV[5] priority aging (ms): jobs due longer ago than this are claimed
        first, oldest first, whatever their priority (lib/due-index.lua,
        dueTake); "" or absent for none (strict priority among due jobs)

Returns { now, nextDue, nextLease, reclaimed, parked, id1, due1, rec1, id2, ... }
  now        Redis clock (ms) when the claim ran
  nextDue    due time (ms) of the earliest job still pending, -1 if none
  nextLease  earliest lease deadline (ms) in flight after this claim, -1 if none
  reclaimed  how many expired leases were returned to due; -1 when the claim
             came after its deadline and did nothing (nextDue and nextLease
             are then -1 too)
  parked     how many due jobs of paused types were parked; -1 when the
             whole queue is paused (nothing claimed; nextDue is then -1)
  then three entries per claimed job: id, its due time (ms), its record after
  the claim (attempts incremented, token set to a fresh one:
  the token the worker must present to ack / nack / extend).
]]
local due, dueBuckets, inflight, dead, errors, seq = KEYS[1], KEYS[2], KEYS[3], KEYS[7], KEYS[8], KEYS[9]
dueUse(due, dueBuckets)
recUse(KEYS[4], KEYS[5], KEYS[6])
pauseUse(KEYS[10], KEYS[11])
local now = nowMs()
local maxClaim, lease, maxReclaim = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if ARGV[4] ~= '' and now > tonumber(ARGV[4]) then return { now, -1, -1, -1, 0 } end
local aging = ARGV[5] ~= nil and ARGV[5] ~= '' and tonumber(ARGV[5]) or nil

-- Expired leases go back to the due index at the due time of their delivery
-- (in the past, so they are claimed first); the attempt they used stays
-- counted, so a job that keeps killing its workers ends in the dead set.
local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, maxReclaim)
if #expired > 0 then
  local recs = recGetMany(expired, 1, #expired, true)
  local errArgs, deadArgs = {}, {}
  callChunked('ZREM', inflight, expired, 1)
  for i, id in ipairs(expired) do
    local due = recs[i] and recordDue(recs[i])
    if due then
      dueAdd(due, id, recordPriority(recs[i]))
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

local out = { now, -1, -1, #expired, 0 }
local wholePaused, pausedTypes, anyTypePaused = pauseState()
if wholePaused then
  recDone()
  out[5] = -1
  local lhead = redis.call('ZRANGE', inflight, '0', '0', 'WITHSCORES')
  if lhead[2] then out[3] = tonumber(lhead[2]) end
  return out
end

if maxClaim > 0 then
  local ids = dueTake(string.format('%d', now), maxClaim, aging)
  local n = #ids
  if n > 0 then
    -- false for a missing record: recs[i] and keys[i] pair with ids[i].
    local recs, keys = recGetMany(ids, 1, n)
    -- The deadline is made a string once: Redis would convert the number per job.
    local deadline = string.format('%d', now + lease)
    -- Unique across rollbacks: see the header. 1024 a ms outlasts any claim
    -- rate, and now * 1024 stays an exact integer (below 2^53) until 2248.
    local token = math.max(tonumber(redis.call('GET', seq) or '0'), now * 1024)
    -- Past 2^53 Lua's numbers (and TypeScript's) would hand out equal tokens:
    -- refuse loudly rather than fence nothing (a clock set centuries ahead).
    if token + n >= 9007199254740992 then
      return redis.error_reply('ERR fencing tokens exhausted: seq or the Redis clock is past 2^53 / 1024 ms')
    end
    redis.call('SET', seq, string.format('%d', token + n))
    local zadd, deadArgs, errArgs, flying, flyingKeys, parking = {}, {}, {}, {}, {}, {}
    for i = 1, n do
      local id, rec = ids[i], recs[i]
      token = token + 1
      local typ = anyTypePaused and rec and recordType(rec)
      if typ and pausedTypes[typ] then
        -- Its record stays where it is, with its due time.
        local args = parking[typ] or {}
        parking[typ] = args
        args[#args + 1] = recordDue(rec); args[#args + 1] = id
        out[5] = out[5] + 1
      elseif rec then
        local claimed, due = recordClaimed(rec, token)
        if claimed then
          flying[#flying + 1] = id; flying[#flying + 1] = claimed
          flyingKeys[#flyingKeys + 1] = keys[i]
          zadd[#zadd + 1] = deadline; zadd[#zadd + 1] = id
          out[#out + 1] = id; out[#out + 1] = due; out[#out + 1] = claimed
        else
          -- Unreadable record: park it with the dead instead of handing a
          -- worker what it cannot parse, or failing the whole batch.
          deadArgs[#deadArgs + 1] = now; deadArgs[#deadArgs + 1] = id
          errArgs[#errArgs + 1] = id; errArgs[#errArgs + 1] = 'corrupt job record'
        end
      end
      -- A due entry without a record cannot be run; taking it out is the repair.
    end
    for typ, args in pairs(parking) do callChunked('ZADD', parkedKey(typ), args, 2) end
    recFly(flying, flyingKeys)
    callChunked('ZADD', inflight, zadd, 2)
    callChunked('ZADD', dead, deadArgs, 2)
    callChunked('HSET', errors, errArgs, 2)
  end
end

recDone()
local head = dueHead()
if head then out[2] = head end
local lhead = redis.call('ZRANGE', inflight, '0', '0', 'WITHSCORES')
if lhead[2] then out[3] = tonumber(lhead[2]) end
return out
