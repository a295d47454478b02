--[[
pause: pause a queue shard, or one job type in it. From the next claim on,
the shard claims nothing (the whole queue), or parks the type's due jobs
(lua/lib/pause.lua). New jobs are still accepted; jobs keep their due times.
Publishes -1 on the wake channel: workers hand back the jobs they claimed
but have not started (consumer/worker.ts), so only jobs already running
finish after the pause.

Why a script: the flag is one HSETNX, but it keeps the time of the first
pause (a second pause changes nothing: idempotent) and reads the clock from
Redis, like every script.

Uses lua/lib/time.lua.

KEYS[1] paused        HASH  '*' or job type -> ms paused at

ARGV[1] wake channel (published -1: a pause)
ARGV[2] '*' for the whole queue, or a job type (checked by the caller)

Returns { pausedAt, created }: the ms the pause began (the first call's),
  and 1 when this call paused it, 0 when it was paused already.
]]
local created = redis.call('HSETNX', KEYS[1], ARGV[2], string.format('%d', nowMs()))
-- Also when it was paused already: a worker that missed the first hears it now.
redis.call('PUBLISH', ARGV[1], '-1')
return { tonumber(redis.call('HGET', KEYS[1], ARGV[2])), created }
