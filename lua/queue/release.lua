--[[
release: hand jobs back without counting a failure. A stopping worker hands
back jobs it claimed but never started (delay 0), so they run again at once
elsewhere instead of waiting out the lease; a handler that finds its job not
due yet by the business clock (another host's clock, the database's) defers it
to a later time, given as a delay or as an absolute time (a periodic job's
next occurrence must land on that occurrence exactly, not on the worker's
estimate of the Redis clock plus a delay).

Why atomic: the token check, the move back to due and the attempt refund must
be one step, or a job could be lost between the sets or released by a worker
that no longer holds it.

Uses lua/lib/record.lua, chunk.lua, records.lua and due-index.lua.

KEYS[1] due           ZSET  bucket name -> lower bound (ms)
KEYS[2] dueBuckets    prefix of the bucket ZSETs (no such key; lua/README.md)
KEYS[3] inflight      ZSET  job id -> lease deadline (ms)
KEYS[4] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[5] records       HASH  the record groups' level, split pointer and count
KEYS[6] recordGroups  prefix of the record groups (no such key; lua/README.md)

ARGV[1] wake channel
ARGV[2] time kind: "in" (ARGV[3] is a delay in ms from the Redis clock's now)
        or "at" (ARGV[3] is a due time in ms since epoch)
ARGV[3] the time (whole ms)
ARGV[4..] pairs of (job id, token)

Returns the number of jobs released (stale pairs are skipped).
]]
local due, dueBuckets, inflight = KEYS[1], KEYS[2], KEYS[3]
dueUse(due, dueBuckets)
recUse(KEYS[4], KEYS[5], KEYS[6])
recMakeRoom((#ARGV - 3) / 2)
local now = nowMs()
local at = tonumber(ARGV[3])
if ARGV[2] == 'in' then at = now + at end
local atText = string.format('%d', at)
local released = 0
for i = 4, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local rec, key = recGet(id, true)
  if recordHeldBy(rec, token) and redis.call('ZSCORE', inflight, id) then
    -- Token 0 (never handed out) so the releasing worker cannot ack it later.
    recPut(key, id, recordRequeued(rec, atText, true))
    redis.call('ZREM', inflight, id)
    dueAdd(atText, id, recordPriority(rec))
    released = released + 1
  end
end
recDone()
if released > 0 and dueHead() == at then redis.call('PUBLISH', ARGV[1], at) end
return released
