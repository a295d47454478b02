--[[
inspect: read one job's whole state as a consistent snapshot (read-only).

A job with a record is in exactly one of: the due index (pending), in flight,
dead. A pending job's due time is the one in its record (lua/lib/due-index.lua
files it by that time), so the buckets need not be read. Uses
lua/lib/record.lua and records.lua.

KEYS[1] inflight      ZSET
KEYS[2] jobs          HASH  job id -> record: the long ones (lib/records.lua)
KEYS[3] records       HASH  the record groups' level, split pointer and count
KEYS[4] recordGroups  prefix of the record groups (no such key; lua/README.md)
KEYS[5] dead          ZSET
KEYS[6] errors        HASH
ARGV[1] job id

Returns { record or false, due time if pending or false, lease deadline or
          false, death time or false, last error or false }
]]
local id = ARGV[1]
recUse(KEYS[2], KEYS[3], KEYS[4])
local rec = recGet(id)
local lease = redis.call('ZSCORE', KEYS[1], id)
local died = redis.call('ZSCORE', KEYS[5], id)
local due = false
if rec and not lease and not died then due = recordDue(rec) or false end
return { rec, due, lease, died, redis.call('HGET', KEYS[6], id) }
