--[[
admit: judge claimed jobs of one queue against the queue limiter's buckets: the
queue's, the job type's and the delivery endpoint's (queue/limits/), each a
GCRA bucket, and the endpoint's slow-down (a receiver's 429 or 503). A job
refused is booked: its turn, the first slot every limited bucket has free
after the slots already booked, is taken in each bucket (one interval of
that bucket, its own share, never the slowest bucket's spacing) and kept
in the bookings under the job's id. A job that comes back holding a booking
due now is admitted on it without being judged again (its share was taken
when it was booked); a fresh job is judged after the booked slots. So a
backlog is spread once and a refused job is certain of its turn.

A turn further than the horizon away is not booked and takes nothing: the
job comes back at the horizon and is judged again then (cheap), so a rule
lifted meanwhile lets it go at once. A bucket remembers the interval it was
filled under; under another one (the rule changed) it starts afresh.

Why atomic: reading the buckets and bookings, judging, and storing the new
arrival times and bookings must be one step across all of them, or two
workers admitting at once would both take the last place, or hand out one
slot twice.

Times: buckets and bookings in whole µs on the Redis clock (as
lua/limits/gcra.lua), the slow-down and horizon in ms.

KEYS[1] queueBucket     HASH  t: theoretical arrival time (µs), i: the interval (µs)
                              it was filled under; expires when t has passed
KEYS[2] typeBucket      HASH  the same, the job type's limit
KEYS[3] endpointBucket  HASH  the same, the endpoint's limit (or its slowed default)
KEYS[4] endpointSlow    HASH  the endpoint's slow-down: until (ms, no admission
                              before it), level (halvings of its rate); absent: none
KEYS[5] bookings        ZSET  job -> its booked turn (µs); at most MAX_BOOKINGS,
                              a booking a horizon overdue dropped
(A bucket whose interval is 0 has no limit and is neither read nor written: the
caller passes any key of the tag for it.)

ARGV[1] jobs asking, n (>= 1)
ARGV[2] queue: interval between admissions (µs; 0: no limit)
ARGV[3] queue: burst tolerance (µs)
ARGV[4] type: interval (µs; 0: no limit)
ARGV[5] type: tolerance (µs)
ARGV[6] endpoint: interval (µs; 0: no limit)
ARGV[7] endpoint: tolerance (µs)
ARGV[8] recovery step (ms): each step past the hold undoes one halving
ARGV[9] horizon (ms, >= 1): the furthest turn booked
ARGV[10] a slowed endpoint's interval when it has no rule (µs, >= 1)
ARGV[10+k] the k-th job's booking member (validated by the caller)

Returns one wait (ms) per job, in order: 0 admitted, else when to come back.
]]
local MAX_BOOKINGS = 10000
-- A booked job back this little early (ms rounding, clocks) is on its turn.
local EARLY = 5000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowMs = math.floor(now / 1000)
local n = tonumber(ARGV[1])
local horizon = tonumber(ARGV[9]) * 1000
local buckets = {}
local function limit(key, base, interval, tolerance, blockedUntil)
  if interval <= 0 then return end
  local b = { key = key, base = base, interval = interval, tolerance = tolerance, blocked = blockedUntil, tat = now, changed = false }
  local s = redis.call('HMGET', key, 't', 'i')
  if tonumber(s[2] or '-1') == base then
    b.tat = math.max(now, tonumber(s[1] or '0'))
  else
    b.changed = true
  end
  -- During a hold, its first slot is the hold's end and the next an interval on.
  if blockedUntil > now then b.tat = math.max(b.tat, blockedUntil - interval + tolerance) end
  buckets[#buckets + 1] = b
end
-- When bucket b could admit its next job (µs): never during a hold.
local function earliest(b)
  return math.max(b.tat + b.interval - b.tolerance, b.blocked)
end

-- The endpoint's slow-down: nothing during its hold, then its rate halved
-- `level` times, one halving undone per recovery step. An endpoint with no
-- rule is spaced at the slowed default meanwhile, so halvings mean something.
local endpointBase, endpointTolerance = tonumber(ARGV[6]), tonumber(ARGV[7])
local slow = redis.call('HMGET', KEYS[4], 'until', 'level')
local holdUntil, level = tonumber(slow[1] or '0'), tonumber(slow[2] or '0')
local halvings = level
if nowMs >= holdUntil then halvings = level - math.floor((nowMs - holdUntil) / tonumber(ARGV[8])) end
if endpointBase <= 0 and (nowMs < holdUntil or halvings > 0) then
  endpointBase = tonumber(ARGV[10])
  endpointTolerance = endpointBase
end
local endpointInterval = endpointBase
if halvings > 0 then
  endpointInterval = endpointBase * 2 ^ halvings
  endpointTolerance = endpointTolerance * 2 ^ halvings
end

limit(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[2]), tonumber(ARGV[3]), 0)
limit(KEYS[2], tonumber(ARGV[4]), tonumber(ARGV[4]), tonumber(ARGV[5]), 0)
limit(KEYS[3], endpointBase, endpointInterval, endpointTolerance, holdUntil * 1000)

redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - horizon)
local booked = redis.call('ZCARD', KEYS[5])
local waits = {}
for k = 1, n do
  local id = ARGV[10 + k]
  local held = redis.call('ZSCORE', KEYS[5], id)
  local turn = held and tonumber(held)
  if turn then
    -- Its own booked slot: admitted on it, or told again how long to wait.
    if turn <= now + EARLY then
      redis.call('ZREM', KEYS[5], id)
      booked = booked - 1
      waits[k] = 0
    else
      waits[k] = math.ceil((turn - now) / 1000)
    end
  else
    turn = now
    for _, b in ipairs(buckets) do turn = math.max(turn, earliest(b)) end
    if turn - now > horizon then
      waits[k] = math.ceil(horizon / 1000)
    elseif turn > now and booked >= MAX_BOOKINGS then
      waits[k] = math.ceil((turn - now) / 1000)
    else
      -- Admitted now or booked at its turn: each bucket gives one place.
      for _, b in ipairs(buckets) do
        b.tat = b.tat + b.interval
        b.changed = true
      end
      if turn > now then
        redis.call('ZADD', KEYS[5], string.format('%.0f', turn), id)
        booked = booked + 1
        waits[k] = math.ceil((turn - now) / 1000)
      else
        waits[k] = 0
      end
    end
  end
end
if booked > 0 then redis.call('PEXPIRE', KEYS[5], 2 * math.ceil(horizon / 1000)) end
for _, b in ipairs(buckets) do
  if b.changed then
    redis.call('HSET', b.key, 't', string.format('%.0f', b.tat), 'i', string.format('%.0f', b.base))
    redis.call('PEXPIRE', b.key, math.ceil((b.tat - now) / 1000) + 1)
  end
end
return waits
