--[[
reshard-step: record the next phase of a change of the shard count (and,
entering 'done', the new count), only for the mover that holds the lock and
only from the phase it expects (producer/reshard.ts).

Why atomic: a mover that stalled past its lock must not overwrite what a
newer one recorded (a later change, or its own finish): the lock, the
phase and the write are checked and made in one step.

KEYS[1] shardCount    STRING the queue's shard count
KEYS[2] reshard       HASH   from, to, phase, epoch (queue/keys.ts reshardKey)
KEYS[3] reshardLock   STRING the running mover's token

ARGV[1] the mover's lock token
ARGV[2] the phase expected now: 'poll' | 'move', or 'steady' (no record,
        or phase 'done')
ARGV[3] from (shards)
ARGV[4] to (shards)
ARGV[5] the phase to record: 'poll' | 'move' | 'done'
ARGV[6] the layout epoch to record (whole number)

Returns 1 recorded; 0 the lock is not this mover's; -1 the record is not in
the expected phase (or names another change). Nothing written unless 1.
]]
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return 0 end
local r = redis.call('HMGET', KEYS[2], 'from', 'to', 'phase')
if ARGV[2] == 'steady' then
  if r[3] and r[3] ~= 'done' then return -1 end
elseif r[3] ~= ARGV[2] or r[1] ~= ARGV[3] or r[2] ~= ARGV[4] then
  return -1
end
redis.call('HSET', KEYS[2], 'from', ARGV[3], 'to', ARGV[4], 'phase', ARGV[5], 'epoch', ARGV[6])
if ARGV[5] == 'done' then redis.call('SET', KEYS[1], ARGV[4]) end
return 1
