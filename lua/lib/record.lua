--[[
record (a library, not a script: scripts/registry.ts puts it in front of every script
that reads or writes a job record)

The job record in the jobs HASH, read and written only through these
functions in Lua (src/queue/record.ts is its one reader in TypeScript, with
the same rule of what is readable):

  "token,attempts,due,maxAttempts,type,payload"
  token        fencing token of the current delivery, 0 when not in flight
  attempts     deliveries so far (a claim counts one)
  due          ms since epoch: the job's place in the due index while it is
               pending (lib/due-index.lua finds its bucket by it); of its
               latest delivery while it is in flight or dead
  maxAttempts  digits, or empty for the job type's default; then 'p' and the
               job's priority (one digit, 0..9) when it is not the default 5,
               so a default job's record is what it was before priorities
               ("3" or "": priority 5; "3p7" or "p7": priority 7)
  type         the job type, never a comma
  payload      JSON text, last, anything

Numbers first and the payload last, so one anchored pattern reads the head
without scanning the payload. A record whose head does not match is
unreadable: a claim moves it to the dead set instead of handing it out, so a
worker is never given what it cannot parse.
]]

-- token, attempts, the position of the comma after attempts, due.
local RECORD_HEAD = '^(%d+),(%d+)(),(%d+),%d*p?%d?,[^,]*,'

-- The priority a record without one has: its jobs are in the default lane
-- (lib/due-index.lua), whose keys are the ones before priorities existed.
local DEFAULT_PRIORITY = '5'

-- The due time of a readable record (digits), or nil.
local function recordDue(rec)
  local _, _, _, due = string.match(rec, RECORD_HEAD)
  return due
end

-- The job type of a readable record, or nil.
local function recordType(rec)
  return string.match(rec, '^%d+,%d+,%d+,%d*p?%d?,([^,]*),')
end

-- The priority of a record (a digit), nil for the default one (and for an
-- unreadable record): the lane its pending job waits in (lib/due-index.lua).
local function recordPriority(rec)
  return rec and string.match(rec, '^%d+,%d+,%d+,%d*p(%d),') or nil
end

-- The part of a new record after its due time: ",maxAttempts[pP],type,".
-- maxA digits or ""; prio a digit, or "", nil or the default for none.
local function recordTail(maxA, prio, typ)
  local p = (prio and prio ~= '' and prio ~= DEFAULT_PRIORITY) and ('p' .. prio) or ''
  return ',' .. maxA .. p .. ',' .. typ .. ','
end

-- Whether `rec` is the record of the delivery holding `token` (a string of digits).
local function recordHeldBy(rec, token)
  return rec ~= false and rec ~= nil and string.sub(rec, 1, #token + 1) == token .. ','
end

-- The record of a new delivery under `token`: one more attempt. Returns the
-- new record and the due time, or nil for an unreadable record.
local function recordClaimed(rec, token)
  local _, a, p, due = string.match(rec, RECORD_HEAD)
  if not a then return nil end
  -- %d, not tostring: Lua prints numbers with "%.14g", a slow path.
  return string.format('%d,%d', token, a + 1) .. string.sub(rec, p), due
end

-- The record of a job going back to the due index at `dueText` (digits), not
-- in flight (token 0, one no claim hands out); with `refund` its last
-- attempt does not count. nil for an unreadable record.
local function recordRequeued(rec, dueText, refund)
  local _, a, p = string.match(rec, RECORD_HEAD)
  if not a then return nil end
  a = tonumber(a)
  if refund and a > 0 then a = a - 1 end
  local rest = string.sub(rec, (string.find(rec, ',', p + 1, true)))
  return '0,' .. string.format('%d', a) .. ',' .. dueText .. rest
end

-- A new record, pending at `dueText`; `tail` is recordTail's (built once per call).
local function recordNew(dueText, tail, payload)
  return '0,0,' .. dueText .. tail .. payload
end

-- A pending record moved to `dueText` with its attempts reset, keeping its
-- type, payload and max attempts (a reschedule). nil for an unreadable record.
local function recordMoved(rec, dueText)
  local _, a, p = string.match(rec, RECORD_HEAD)
  if not a then return nil end
  return '0,0,' .. dueText .. string.sub(rec, (string.find(rec, ',', p + 1, true)))
end
