--[[
due-index (a library, not a script: scripts/registry.ts puts it in front of every
script that reads or moves pending jobs, after lib/record.lua)

The pending jobs of a queue shard, in due-time order, kept in small ZSET
buckets listed in an index ZSET, instead of in one large ZSET.

Why: a ZSET of more than zset-max-listpack-entries (128) members is a skiplist
and costs about 127 B per member for a 19-byte job id (skiplist node, dict
entry, the id's string); a ZSET of at most 128 stays a listpack at about 31 B
per member. Buckets of up to 64 jobs plus one index entry per bucket cost
about 45 B per pending job where one ZSET cost 127 (BENCHMARKS.md). The order
and the O(log n) moves by id stay: a job's due time is kept in its record, and
the record's due time finds its bucket.

Layout (one queue shard, all under its hash tag):
  index            ZSET  bucket name -> lower bound (ms since epoch); the name
                         is the bound in digits, so the index reads as bounds
  prefix .. name   ZSET  job id -> due time (ms since epoch)

Priority lanes: each priority 0..9 in use has an index and buckets of its own,
laid out as above. The default priority's (5) are the keys above, so a queue
that never uses priorities has exactly the keys it had before them; lane p's
are prefix .. 'p' .. p .. ':index' and prefix .. 'p' .. p .. ':' .. name, and
prefix .. 'lanes' (ZSET p -> p) lists the other lanes that hold jobs, so a
claim or a head look-up reads one empty ZSET, not ten indexes, when only the
default lane is used. None of these names is all digits or 'index', so no
lane key is ever taken for a default bucket.

Invariants, kept by every function here:
  I1  Buckets partition the time line in index order: every job of bucket b is
      due at or after b's lower bound and before the next bucket's, and lower
      bounds strictly increase along the index. The earliest job is therefore
      the first member of the first bucket, and claims walk buckets in order.
  I2  No listed bucket is empty, and no bucket exists unlisted.
  I3  A pending job is in exactly one bucket: the one dueLocate returns, in
      the lane of its record's priority, for the due time in its record.
      Whoever moves a job updates both together.
  I4  `lanes` lists exactly the lanes other than the default whose index is
      not empty.
I1 and I2 hold in each lane on its own.
A bucket holds at most BUCKET_MAX jobs, except when they all share one due
time: a bucket is only ever split between two different due times, or I1
would break. A removal that leaves a bucket under a quarter full joins it to a
neighbour when both fit in half a bucket.

Bucket keys are built here from a prefix the caller declares in KEYS (the key
itself never exists). Declaring an absent key is what keeps these scripts off
a shard whose slot is migrating between cluster masters: Redis answers
TRYAGAIN (the client retries) instead of running the script while some of the
shard's buckets have moved and others have not (lua/README.md).
]]

-- Half of Redis' default zset-max-listpack-entries (128). A listpack is
-- searched and shifted end to end on every ZADD and ZREM, so a job's add
-- costs in proportion to its bucket's size: 64 spends about a fifth fewer
-- Redis instructions per enqueued job than 128 for 3 B more per job
-- (callgrind, BENCHMARKS.md). A server set below 64 only turns buckets into
-- skiplists sooner: more memory, same behaviour.
local BUCKET_MAX = 64

-- Due times pass through these functions as whole ms in decimal digits, and
-- numbers given to redis.call are written as strings ('0', not 0): Redis 7.0
-- prints a Lua number argument, and every score it returns, with
-- snprintf("%.17g"), which cost more instructions than the listpack writes
-- (callgrind, BENCHMARKS.md). Hence also ZCOUNT (an integer) where a score
-- would only be compared. A bucket's name is its lower bound, in digits
-- (unique by I1).

-- The default lane's index and bucket prefix, the lanes ZSET, and the lane
-- the functions below work in (set by dueLane).
local dueBase, dueBasePrefix, dueLanesKey
local dueIndex, duePrefix, dueLaneP

-- Every script calls this once, before any other function here.
local function dueUse(index, prefix)
  dueBase, dueBasePrefix, dueLanesKey = index, prefix, prefix .. 'lanes'
  dueIndex, duePrefix, dueLaneP = index, prefix, nil
end

-- Works in lane p from here on: a priority digit, nil for the default lane.
local function dueLane(p)
  if p == nil or p == DEFAULT_PRIORITY then
    dueIndex, duePrefix, dueLaneP = dueBase, dueBasePrefix, nil
  else
    dueIndex, duePrefix, dueLaneP = dueBasePrefix .. 'p' .. p .. ':index', dueBasePrefix .. 'p' .. p .. ':', p
  end
end

-- The lanes holding jobs, highest priority first: priority digits, the
-- default lane among them (always listed: it may be empty).
local function dueLanes()
  local others = redis.call('ZRANGE', dueLanesKey, '0', '-1', 'REV')
  local out, placed = {}, false
  for _, p in ipairs(others) do
    if not placed and p < DEFAULT_PRIORITY then out[#out + 1] = DEFAULT_PRIORITY; placed = true end
    out[#out + 1] = p
  end
  if not placed then out[#out + 1] = DEFAULT_PRIORITY end
  return out
end

-- I4 after the current lane's last bucket went.
local function dueLaneEmptied()
  if dueLaneP and redis.call('EXISTS', dueIndex) == 0 then redis.call('ZREM', dueLanesKey, dueLaneP) end
end

-- The bucket that holds, or would take, a job due at t: the last one whose
-- lower bound is at or before t. When t is before every bound, the first
-- bucket and true: adding there must lower its bound to t. nil when there is none.
local function dueLocate(t)
  local r = redis.call('ZRANGE', dueIndex, t, '-inf', 'BYSCORE', 'REV', 'LIMIT', '0', '1')
  if r[1] then return r[1], false end
  r = redis.call('ZRANGE', dueIndex, '0', '0')
  if r[1] then return r[1], true end
  return nil, false
end

-- A new bucket with lower bound `lower` holding `pairs` (due, id, due, id, ...).
local function dueNewBucket(lower, pairs)
  redis.call('ZADD', duePrefix .. lower, unpack(pairs))
  redis.call('ZADD', dueIndex, lower, lower)
end

-- Gives the first bucket, `name`, the earlier bound t; returns its new name.
local function dueLower(name, t)
  redis.call('RENAME', duePrefix .. name, duePrefix .. t)
  redis.call('ZREM', dueIndex, name)
  redis.call('ZADD', dueIndex, t, t)
  return t
end

-- Splits a full bucket of n jobs near its middle, between two different due
-- times: the later part moves to a new bucket (copied inside Redis by
-- ZRANGESTORE). False when all its jobs share one due time.
local function dueSplit(key, n)
  -- The run of jobs sharing the middle job's due time s spans ranks
  -- [before, upTo): a cut is allowed at either end of it, but not at 0 or n.
  local s = redis.call('ZRANGE', key, tostring(math.floor(n / 2)), tostring(math.floor(n / 2)), 'WITHSCORES')[2]
  local before = redis.call('ZCOUNT', key, '-inf', '(' .. s)
  local upTo = redis.call('ZCOUNT', key, '-inf', s)
  local cut
  if upTo < n and (before == 0 or upTo - n / 2 <= n / 2 - before) then cut = upTo
  elseif before > 0 then cut = before
  else return false end
  local name = redis.call('ZRANGE', key, tostring(cut), tostring(cut), 'WITHSCORES')[2]
  redis.call('ZRANGESTORE', duePrefix .. name, key, tostring(cut), '-1')
  redis.call('ZREMRANGEBYRANK', key, tostring(cut), '-1')
  redis.call('ZADD', dueIndex, name, name)
  return true
end

-- Adds a job due at t to the lane of priority p (its record's:
-- recordPriority; nil for the default). The caller has made sure it is in no
-- bucket. A full bucket makes room in O(1) when the job falls outside its
-- jobs' times (a new bucket, or the old jobs renamed into one); only a job
-- inside them costs a split, and a bucket whose jobs share one time just grows.
local function dueAdd(t, id, p)
  dueLane(p)
  local name, below = dueLocate(t)
  if not name then
    dueNewBucket(t, { t, id })
    if dueLaneP then redis.call('ZADD', dueLanesKey, dueLaneP, dueLaneP) end
    return
  end
  local key = duePrefix .. name
  local n = redis.call('ZCARD', key)
  if n >= BUCKET_MAX then
    if below then
      -- Before everything pending: a new first bucket.
      dueNewBucket(t, { t, id })
      return
    end
    local earlier = redis.call('ZCOUNT', key, '-inf', '(' .. t)
    if earlier == n then
      -- After every job of this bucket (the usual case: due times mostly
      -- grow): start the next bucket and leave this one full.
      dueNewBucket(t, { t, id })
      return
    end
    local upTo = redis.call('ZCOUNT', key, '-inf', t)
    if upTo == 0 then
      -- Before every job of this bucket: they move, whole, to a new bucket
      -- named after their first time, and this one keeps only the new job.
      local first = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')[2]
      redis.call('RENAME', key, duePrefix .. first)
      redis.call('ZADD', dueIndex, first, first)
    elseif not (earlier == 0 and upTo == n) and dueSplit(key, n) then
      -- (Not when every job is due at t: then it just grows.)
      name = dueLocate(t)
      key = duePrefix .. name
    end
  end
  if below then key = duePrefix .. dueLower(name, t) end
  redis.call('ZADD', key, t, id)
end

-- Moves every job of bucket `from` into the bucket `into` just before it in
-- the index, and drops `from`: into's range then spans both (I1 holds).
local function dueMerge(into, from)
  local fromKey = duePrefix .. from
  local flat = redis.call('ZRANGE', fromKey, '0', '-1', 'WITHSCORES')
  local args = {}
  for i = 1, #flat, 2 do
    args[i] = flat[i + 1]
    args[i + 1] = flat[i]
  end
  redis.call('ZADD', duePrefix .. into, unpack(args))
  redis.call('DEL', fromKey)
  redis.call('ZREM', dueIndex, from)
end

-- Bucket `name`, left with n (< BUCKET_MAX / 4) jobs by a removal, joins a
-- neighbour when the two together fill at most half a bucket. Without this,
-- cancels (most orders are paid, so most expiry jobs are cancelled) would
-- leave a bucket, about 200 B of key, listpack and index entry, for every
-- few jobs, and claims would walk them one by one. Half a bucket leaves room,
-- so a merged bucket does not split again at once.
local function dueMergeSmall(name, n)
  local limit = BUCKET_MAX / 2
  local nextName = redis.call('ZRANGE', dueIndex, '(' .. name, '+inf', 'BYSCORE', 'LIMIT', '0', '1')[1]
  if nextName and n + redis.call('ZCARD', duePrefix .. nextName) <= limit then
    dueMerge(name, nextName)
    return
  end
  local prevName = redis.call('ZRANGE', dueIndex, '(' .. name, '-inf', 'BYSCORE', 'REV', 'LIMIT', '0', '1')[1]
  if prevName and n + redis.call('ZCARD', duePrefix .. prevName) <= limit then
    dueMerge(prevName, name)
  end
end

-- Removes a job due at t from the lane of priority p (both from its record;
-- t nil if the record was unreadable). False when it is not there.
local function dueRemove(t, id, p)
  if not t then return false end
  dueLane(p)
  local name = dueLocate(t)
  if not name then return false end
  local key = duePrefix .. name
  if redis.call('ZREM', key, id) == 0 then return false end
  local n = redis.call('ZCARD', key)
  if n == 0 then
    redis.call('ZREM', dueIndex, name)
    dueLaneEmptied()
  elseif n < BUCKET_MAX / 4 then
    dueMergeSmall(name, n)
  end
  return true
end

-- Takes up to max jobs of the current lane due at or before upTo (ms,
-- digits), earliest first, out of its buckets. Appends their ids to out.
local function dueTakeLane(upTo, max, out)
  local limit = #out + max
  while #out < limit do
    local first = redis.call('ZRANGE', dueIndex, '0', '0')[1]
    if not first or tonumber(first) > tonumber(upTo) then break end
    local key = duePrefix .. first
    local got = redis.call('ZRANGE', key, '-inf', upTo, 'BYSCORE', 'LIMIT', '0', tostring(limit - #out))
    if #got == 0 then break end
    -- The due jobs are exactly the lowest ranks.
    redis.call('ZREMRANGEBYRANK', key, '0', tostring(#got - 1))
    for i = 1, #got do out[#out + 1] = got[i] end
    -- Jobs left in this bucket are not due yet (I1: nor is any later bucket's),
    -- unless max was reached; either way the walk ends here.
    if redis.call('EXISTS', key) == 1 then break end
    redis.call('ZREM', dueIndex, first)
  end
  dueLaneEmptied()
end

-- The due times (numbers) of the current lane's earliest jobs due at or
-- before upTo, up to max of them, earliest first; nothing is taken.
local function duePeek(upTo, max)
  local out = {}
  local names = redis.call('ZRANGE', dueIndex, '-inf', upTo, 'BYSCORE', 'LIMIT', '0', tostring(max))
  for _, name in ipairs(names) do
    local got = redis.call('ZRANGE', duePrefix .. name, '-inf', upTo, 'BYSCORE', 'LIMIT', '0', tostring(max - #out), 'WITHSCORES')
    for i = 2, #got, 2 do out[#out + 1] = tonumber(got[i]) end
    if #out >= max then break end
  end
  return out
end

-- The jobs overdue past the aging cutoff, from every lane, oldest first
-- (equal times: higher priority first); appended to out.
local function dueTakeAged(lanes, cutoff, max, out)
  local cands = {}
  for li, p in ipairs(lanes) do
    dueLane(p)
    for _, t in ipairs(duePeek(cutoff, max)) do cands[#cands + 1] = { t, li } end
  end
  if #cands == 0 then return end
  table.sort(cands, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  local per = {}
  for i = 1, math.min(max, #cands) do per[cands[i][2]] = (per[cands[i][2]] or 0) + 1 end
  -- Each lane gives exactly its earliest jobs, the ones peeked; they are
  -- then put in the merged order of their times.
  local taken = {}
  for li, k in pairs(per) do
    dueLane(lanes[li])
    taken[li] = {}
    dueTakeLane(cutoff, k, taken[li])
  end
  local pos = {}
  for i = 1, math.min(max, #cands) do
    local li = cands[i][2]
    pos[li] = (pos[li] or 0) + 1
    local id = taken[li][pos[li]]
    if id then out[#out + 1] = id end
  end
end

-- Takes up to max jobs due at or before now (ms, digits) out of the buckets,
-- in claim order, and returns their ids (their due times are in their
-- records). Claim order: with agingMs (a number, or nil for none), first the
-- jobs due more than agingMs ago, from every lane, oldest first, but at most
-- half of the claim (rounded up; a claim of one takes them on an even Redis
-- millisecond): so a job overdue past agingMs gets a share of every claim
-- however much higher-priority work is due, and a backlog older than agingMs
-- does not turn the claim into plain due order (the rest of the claim still
-- goes by priority); then the lanes from priority 9 down to 0, earliest due
-- first within each.
local function dueTake(now, max, agingMs)
  local out = {}
  local lanes = dueLanes()
  if agingMs and #lanes > 1 then
    local share = max > 1 and math.ceil(max / 2) or (tonumber(now) % 2 == 0 and 1 or 0)
    if share > 0 then dueTakeAged(lanes, string.format('%d', tonumber(now) - agingMs), share, out) end
  end
  for _, p in ipairs(lanes) do
    if #out >= max then break end
    dueLane(p)
    dueTakeLane(now, max - #out, out)
  end
  return out
end

-- The earliest due time pending (ms) in any lane, or nil.
local function dueHead()
  local best
  for _, p in ipairs(dueLanes()) do
    dueLane(p)
    local first = redis.call('ZRANGE', dueIndex, '0', '0')[1]
    if first then
      local h = redis.call('ZRANGE', duePrefix .. first, '0', '0', 'WITHSCORES')
      local t = h[2] and tonumber(h[2])
      if t and (not best or t < best) then best = t end
    end
  end
  return best
end

-- How many pending jobs are due at or before now (ms), in every lane.
local function dueCount(now)
  local n = 0
  for _, p in ipairs(dueLanes()) do
    dueLane(p)
    local names = redis.call('ZRANGE', dueIndex, '-inf', now, 'BYSCORE')
    for i, name in ipairs(names) do
      if i < #names then
        -- Ends before the next bucket's bound, which is at or before now (I1).
        n = n + redis.call('ZCARD', duePrefix .. name)
      else
        n = n + redis.call('ZCOUNT', duePrefix .. name, '-inf', now)
      end
    end
  end
  return n
end
