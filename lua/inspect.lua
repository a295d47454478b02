--[[
inspect: read one job's whole state as a consistent snapshot (read-only).

KEYS[1] due  KEYS[2] inflight  KEYS[3] jobs  KEYS[4] dead  KEYS[5] errors
ARGV[1] job id

Returns { record or false, due score or false, lease deadline or false,
          death time or false, last error or false }
]]
local id = ARGV[1]
return {
  redis.call('HGET', KEYS[3], id),
  redis.call('ZSCORE', KEYS[1], id),
  redis.call('ZSCORE', KEYS[2], id),
  redis.call('ZSCORE', KEYS[4], id),
  redis.call('HGET', KEYS[5], id),
}
