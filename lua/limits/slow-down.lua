--[[
slow-down: a receiver answered 429 or 503 with Retry-After: its endpoint takes
nothing until then (the hold), and its rate is halved once more, at most
`max level` times, one halving undone per recovery step after the hold. A
signal during a hold only lengthens the hold: the calls of one burst that
all got the same answer halve the rate once, not once each.

Why atomic: reading the current level, raising it and recording the hold
must be one step, or two workers hearing 429 at once would each halve from
the same level and one halving would be lost (or both would count).

Times are ms on the Redis clock.

KEYS[1] endpointSlow  HASH  until (ms), level (halvings); expires when fully recovered
KEYS[2] slowed        ZSET  endpoint -> when its slow-down ends (ms); at most MAX_SLOWED

ARGV[1] hold (ms, >= 1; the caller caps it)
ARGV[2] most halvings (>= 1)
ARGV[3] recovery step (ms, >= 1)
ARGV[4] the endpoint (the member of KEYS[2], validated by the caller)

Returns { until, level }: the hold's end (ms) and the halvings now in force.
]]
local MAX_SLOWED = 1000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hold, maxLevel, step = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'until', 'level')
local holdUntil, level = tonumber(s[1] or '0'), tonumber(s[2] or '0')
if now >= holdUntil then
  -- The hold is over: what recovered since counts, then one more halving.
  level = math.max(0, level - math.floor((now - holdUntil) / step))
  level = math.min(maxLevel, level + 1)
end
if now + hold > holdUntil then holdUntil = now + hold end
local ends = holdUntil + level * step
redis.call('HSET', KEYS[1], 'until', holdUntil, 'level', level)
redis.call('PEXPIREAT', KEYS[1], ends)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], ends, ARGV[4])
-- Bounded: the endpoints ending soonest give way (they also label a metric).
local over = redis.call('ZCARD', KEYS[2]) - MAX_SLOWED
if over > 0 then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1) end
return { holdUntil, level }
