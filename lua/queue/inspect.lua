--[[
inspect: read one job's whole state as a consistent snapshot (read-only).

A job with a record is in exactly one of: the due index (pending), in flight,
dead. A pending job's due time is the one in its record (lua/lib/due-index.lua
files it by that time), so the buckets need not be read. Uses
lua/lib/record.lua.

KEYS[1] inflight  ZSET
KEYS[2] jobs      HASH
KEYS[3] dead      ZSET
KEYS[4] errors    HASH
ARGV[1] job id

Returns { record or false, due time if pending or false, lease deadline or
          false, death time or false, last error or false }
]]
local id = ARGV[1]
local rec = redis.call('HGET', KEYS[2], id)
local lease = redis.call('ZSCORE', KEYS[1], id)
local died = redis.call('ZSCORE', KEYS[3], id)
local due = false
if rec and not lease and not died then due = recordDue(rec) or false end
return { rec, due, lease, died, redis.call('HGET', KEYS[4], id) }
