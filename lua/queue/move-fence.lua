--[[
move-fence: make a mover the owner of a queue shard's part of a change of
the shard count by copy (a Redis Cluster; producer/reshard.ts). Every mover
takes a new generation under the change's lock and fences every old and new
shard with it before it copies, removes or settles anything there; move-in,
move-out and move-settle then run only for the shard's latest generation
(lib/pause.lua, moverIs). A mover that stalled past its lock and comes back
finds a later generation and changes nothing, however its steps and the new
mover's interleave.

Why a script: the generation only ever rises (a stalled mover must not take
a shard back); a read then a write from the client could lower it.

Uses lua/lib/pause.lua.

KEYS[1] paused        HASH  (not read here)
KEYS[2] parked        prefix of the parked ZSETs and of the mover's keys (no such key)

ARGV[1] the mover's generation (whole number)

Returns the shard's generation after the call (ARGV[1] or a later one).
]]
pauseUse(KEYS[1], KEYS[2])
local now = tonumber(redis.call('GET', moverKey()) or '0')
local want = tonumber(ARGV[1])
if want > now then
  redis.call('SET', moverKey(), ARGV[1])
  return want
end
return now
