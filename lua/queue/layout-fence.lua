--[[
layout-fence: raise a queue shard's layout epoch, before a change of the
shard count tells producers to write by the new count (producer/reshard.ts).
From then on the shard refuses writes that carry an older epoch
(queue/schedule.lua, cancel.lua), so a process still writing by the old count
cannot put a job in its old shard while another writes it to its new one.

Why a script: the epoch only ever rises (a stalled mover of an earlier step
must not lower it); a read then a write from the client could.

KEYS[1] records       HASH  the shard's record groups' state; field e is the epoch

ARGV[1] epoch (whole number)

Returns the shard's epoch after the call (ARGV[1] or a later one).
]]
local now = tonumber(redis.call('HGET', KEYS[1], 'e') or '0')
local want = tonumber(ARGV[1])
if want > now then
  redis.call('HSET', KEYS[1], 'e', ARGV[1])
  return want
end
return now
