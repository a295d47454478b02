--[[
distinct: admit a member into a sliding window of distinct members (a
client's distinct reminder contacts an hour): a member seen within the window
is admitted again (its time refreshed); a new one only while the window holds
fewer than the limit.

Why atomic: trimming, counting and adding must be one step, or two instances
admitting at once would both see the last place free and both take it.

Times are ms on the Redis clock.

KEYS[1] window  ZSET  member -> when it was last admitted (ms); expires a window
                      after the last admission.

ARGV[1] the window (ms, >= 1)
ARGV[2] the limit (distinct members in a window, >= 1)
ARGV[3] the member (the caller hashes what it names: never a contact itself)

Returns 0 when admitted, else the ms until the oldest member leaves the window.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local member = ARGV[3]

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if not redis.call('ZSCORE', KEYS[1], member) and redis.call('ZCARD', KEYS[1]) >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', KEYS[1], now, member)
redis.call('PEXPIRE', KEYS[1], window)
return 0
