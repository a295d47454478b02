--[[
time (a library, not a script: scripts/registry.ts puts it in front of every script
that reads the clock)

Every due, lease and arrival decision is made on the Redis server's clock, so
clock skew between app hosts cannot fire a job early.
]]

-- The Redis clock in whole ms since epoch.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
