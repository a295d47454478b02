--[[
redrive: move dead jobs back to due (now), with their attempts reset, either
one by id or up to a bound of the oldest.

Why atomic: leaving the dead set and re-entering due with a fresh record must
be one step, or the job could be in neither set.

Uses lua/lib/due-index.lua.

KEYS[1] dead          ZSET  job id -> time of death (ms)
KEYS[2] due index     ZSET  bucket name -> lower bound (ms)
KEYS[3] due buckets   prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[4] jobs          HASH  job id -> record "gen,attempts,due,maxAttempts,type,payload"

ARGV[1] wake channel
ARGV[2] "one" | "all"
ARGV[3] job id for "one"; max count for "all"

Returns the number of jobs redriven. The last error stays in the errors hash
until the job is acked, so an operator can still see why it died.
]]
local dead, jobs = KEYS[1], KEYS[4]
dueUse(KEYS[2], KEYS[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowText = string.format('%d', now)
local ids
if ARGV[2] == 'one' then
  ids = { ARGV[3] }
else
  ids = redis.call('ZRANGE', dead, 0, tonumber(ARGV[3]) - 1)
end
local moved = 0
for _, id in ipairs(ids) do
  local rec = redis.call('HGET', jobs, id)
  local rest = rec and string.match(rec, '^%d+,%d+,%d+,(.*)$')
  if rest and redis.call('ZREM', dead, id) == 1 then
    redis.call('HSET', jobs, id, '0,0,' .. nowText .. ',' .. rest)
    dueAdd(nowText, id)
    moved = moved + 1
  end
end
if moved > 0 then redis.call('PUBLISH', ARGV[1], now) end
return moved
