--[[
reshard-lock: renew or release the lock of a change of the shard count, only
for the mover holding it (producer/reshard.ts).

Why atomic: a GET then a PEXPIRE or DEL from the client would renew or
delete the lock another mover took in between (this one stalled past it).

KEYS[1] reshardLock   STRING the running mover's token

ARGV[1] the mover's lock token
ARGV[2] ms to hold it from now; 0 releases it

Returns 1 renewed or released; 0 the lock is not this mover's (nothing done).
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
