--[[
gcra: judge a run of rate-limit decisions against one bucket (generic cell
rate algorithm): a bucket admits one per interval on average and a burst of
tolerance / interval at once. The decisions are judged one after the other at
this call's moment, as that many calls in a row would judge them; a take that
is admitted is recorded, a check never is.

Why atomic: reading the bucket, judging and storing the new arrival time must
be one step, or two instances taking at once would both read the same bucket
and both admit the last place in it.

Times are whole microseconds on the Redis clock, exact in Lua's doubles and
stored with %.0f (tostring keeps 14 significant digits: a bucket kept that way
in ms lost intervals under 0.05 ms and skewed others).

KEYS[1] bucket  STRING  the theoretical arrival time (µs since epoch, Redis clock);
                        absent: an empty bucket. Expires when it would be empty again.

ARGV[1] interval between admissions (µs, >= 1)
ARGV[2] burst tolerance (µs): interval times the burst
ARGV[3] the decisions in the order asked, one letter each: 't' take (admit and
        record), 'c' check (would it admit?)

Returns { wait1, wait2, ... }, one per decision in order: 0 admitted, else the
ms (rounded up) until one would be.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local asked = ARGV[3]
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local waits = {}
local taken = false
for i = 1, #asked do
  local nextTat = tat + interval
  local wait = nextTat - tolerance - now
  if wait > 0 then
    waits[i] = math.ceil(wait / 1000)
  else
    waits[i] = 0
    if string.byte(asked, i) == 116 then -- 't'
      tat = nextTat
      taken = true
    end
  end
end
if taken then redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1) end
return waits
