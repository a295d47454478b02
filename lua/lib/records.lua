--[[
records (a library, not a script: scripts/registry.ts puts it in front of every script
that reads or writes job records)

Where a queue shard keeps its job records (their format is lib/record.lua):
in small HASHes, groups of about REC_LOAD records chosen by a hash of the job
id, rather than in one large HASH.

Why: a HASH of more than hash-max-listpack-entries (512 by default) fields, or
with any field or value longer than hash-max-listpack-value (64 B), is a hashtable
and costs about 50 B per record besides the id and the record themselves
(the dict entry, the table's bucket pointers, two allocations' headers and
rounding); a small one stays a listpack, where a record costs its id and its
text plus 4 B (BENCHMARKS.md, Engine at size). The due index keeps pending
jobs in small ZSETs for the same reason (lib/due-index.lua).

Layout (one queue shard, all under its hash tag):
  meta            HASH  l (level), p (split pointer), n (records in groups),
                        g ('1' when the last schedule wrote new records into
                        groups: QUEUE_RECORD_GROUPS=1); also e, the shard's
                        layout epoch (queue/layout-fence.lua; not read here)
  prefix .. g     HASH  job id -> record, for the group number g (digits)
  legacy          HASH  job id -> record: records too long for a listpack,
                        records written with groups off (while a build that
                        reads only this HASH may still run), and those
                        written before groups existed. With g = '1' a record
                        rewritten here that fits a group moves to it.

Groups grow by linear hashing: with h the first 32 bits of the id's SHA-1,
a job's group is h mod 2^l, or h mod 2^(l+1) when that is below p. When the
groups hold more than REC_LOAD records on average, group p is split (its
records whose h mod 2^(l+1) is p + 2^l move there) and p moves on; when p
reaches 2^l, l grows by one and p starts again at 0. Splits happen before a
script's first lookup (recReserve: room for the records a schedule may add)
or after its last (recDone), so a script finds every record in one place for
its whole run, and a bulk schedule never fills a group past its share. Groups never join again: after a backlog drains the empty groups
are gone (Redis deletes an empty HASH) and the next records spread over the
same number of groups.

Invariants, kept by every function here:
  R1  A job has at most one record: in the group of its id under the current
      (l, p), or in the legacy HASH, never both.
  R2  n is the number of records in the groups (stats reads it: O(1)).
  R3  A group's fields and values are at most REC_MAX_LEN bytes: a record
      that would be longer is written to the legacy HASH instead.
  R4  A job in flight has its record in the legacy HASH: a claim moves it
      there (in flight is short, a token takes most records past 64 B, and
      ack, nack and extend then find it with one HMGET a call); written back
      as pending, it returns to its group when groups are on and it fits.
A pending job's record is looked for in its group first, one in flight or
dead in the legacy HASH first; the legacy HASH is read only when it exists,
the groups only while they hold a record (n > 0).

Group keys are built here from a prefix the caller declares in KEYS (the key
itself never exists), as the due buckets' are: see lua/README.md, slot
migration.
]]

-- Records per group on average before a split; groups not yet split in a
-- round hold up to twice as many. A lookup or a write walks its group's
-- listpack, so the load sets what a pending record costs in Redis time: 40
-- cost about half as much again as 16, which costs about 4 B a job more (the
-- groups' own keys; BENCHMARKS.md, Engine at size).
local REC_LOAD = 16
-- Redis' default hash-max-listpack-value: one longer field or value turns a
-- whole group into a hashtable.
local REC_MAX_LEN = 64

local recLegacy, recMeta, recPrefix
local recLevel, recSplit, recCount, recDelta, recGrouped
local recLegacyLive -- nil until asked: whether the legacy HASH exists

-- Every script that reaches records calls this once, before any other function here.
local function recUse(legacy, meta, prefix)
  recLegacy, recMeta, recPrefix = legacy, meta, prefix
  local m = redis.call('HMGET', meta, 'l', 'p', 'n', 'g')
  recLevel, recSplit, recCount = tonumber(m[1] or '0'), tonumber(m[2] or '0'), tonumber(m[3] or '0')
  recGrouped = m[4] == '1'
  recDelta = 0
  -- A script may turn to a second shard (queue/move.lua): what it knew of the first goes.
  recLegacyLive = nil
end

-- A schedule tells whether new records go to groups (its caller's
-- QUEUE_RECORD_GROUPS); the other scripts follow what the last one said.
local function recSetGrouped(grouped)
  if grouped ~= recGrouped then
    recGrouped = grouped
    redis.call('HSET', recMeta, 'g', grouped and '1' or '0')
  end
end

local function recHash(id)
  return tonumber(string.sub(redis.sha1hex(id), 1, 8), 16)
end

-- The key of the group that holds, or would take, the record of `id`.
local function recGroup(id)
  local size = 2 ^ recLevel
  local h = recHash(id)
  local g = h % size
  if g < recSplit then g = h % (size * 2) end
  return recPrefix .. string.format('%d', g)
end

local function recLegacyExists()
  if recLegacyLive == nil then recLegacyLive = redis.call('EXISTS', recLegacy) == 1 end
  return recLegacyLive
end

-- Whether any record is in a group now (R2 keeps the count exact): while
-- none is (groups never on), no lookup hashes an id or reads a group.
local function recGroupsInUse()
  return recCount + recDelta > 0
end

local function recFromGroup(id)
  local key = recGroup(id)
  return redis.call('HGET', key, id), key
end

local function recFromLegacy(id)
  if recLegacyExists() then return redis.call('HGET', recLegacy, id) end
  return false
end

-- The record of `id` and the key that holds it; false and nil when it has
-- none. A pending job's record is looked for in its group first; with
-- `flying` (a job in flight or dead: a claim put its record in the jobs
-- HASH), in the jobs HASH first.
local function recGet(id, flying)
  local rec, key
  if flying then
    rec = recFromLegacy(id)
    if rec then return rec, recLegacy end
  end
  if recGroupsInUse() then
    rec, key = recFromGroup(id)
    if rec then return rec, key end
  end
  if not flying then
    rec = recFromLegacy(id)
    if rec then return rec, recLegacy end
  end
  return false, nil
end

-- Looks for ids[from + j - 1], for each j of `js`, in the jobs HASH (one
-- HMGET per CHUNK); fills recs[j] and keys[j] for those found, returns the
-- other js.
local function recManyFromLegacy(ids, from, js, recs, keys)
  if #js == 0 or not recLegacyExists() then return js end
  local left = {}
  for k = 1, #js, CHUNK do
    local last = math.min(k + CHUNK - 1, #js)
    local ask = {}
    for m = k, last do ask[#ask + 1] = ids[from + js[m] - 1] end
    local part = redis.call('HMGET', recLegacy, unpack(ask))
    for m = k, last do
      local rec = part[m - k + 1]
      if rec then
        recs[js[m]], keys[js[m]] = rec, recLegacy
      else
        left[#left + 1] = js[m]
      end
    end
  end
  return left
end

-- The same in the groups: keys[j] is set to the group's key whether the
-- record is there or not (recAdd takes it for a new record).
local function recManyFromGroups(ids, from, js, recs, keys)
  if #js == 0 or not recGroupsInUse() then return js end
  local left = {}
  for _, j in ipairs(js) do
    local rec, key = recFromGroup(ids[from + j - 1])
    keys[j] = key
    if rec then recs[j] = rec else left[#left + 1] = j end
  end
  return left
end

-- The records of ids[from..to] and the keys that hold them, as two lists
-- indexed from 1: false for an id without a record, and then its group's key
-- or nil. `flying` as in recGet.
local function recGetMany(ids, from, to, flying)
  local recs, keys, all = {}, {}, {}
  for j = 1, to - from + 1 do
    all[j] = j
    recs[j] = false
  end
  if flying then
    recManyFromGroups(ids, from, recManyFromLegacy(ids, from, all, recs, keys), recs, keys)
  else
    recManyFromLegacy(ids, from, recManyFromGroups(ids, from, all, recs, keys), recs, keys)
  end
  return recs, keys
end

local function recFits(id, rec)
  return recGrouped and #id <= REC_MAX_LEN and #rec <= REC_MAX_LEN
end

-- Writes the record of a job that has none: into its group (`group`, when
-- the caller has its key) when groups are on and both fit a listpack, else
-- into the legacy HASH.
local function recAdd(id, rec, group)
  if recFits(id, rec) then
    recDelta = recDelta + redis.call('HSET', group or recGroup(id), id, rec)
  else
    redis.call('HSET', recLegacy, id, rec)
    recLegacyLive = true
  end
end

-- Writes the record of `id` over the one found under `key` (recGet): in
-- place; into the legacy HASH when it grew too long for its group (R3); into
-- its group when it is in the legacy HASH, groups are on and it fits (a
-- claim's token made it too long for a while, or an earlier build wrote it).
local function recPut(key, id, rec)
  if key ~= recLegacy and #rec > REC_MAX_LEN then
    redis.call('HDEL', key, id)
    recDelta = recDelta - 1
    redis.call('HSET', recLegacy, id, rec)
    recLegacyLive = true
  elseif key == recLegacy and recFits(id, rec) then
    redis.call('HDEL', recLegacy, id)
    recAdd(id, rec)
  else
    redis.call('HSET', key, id, rec)
  end
end

-- Deletes the record of `id` found under `key` (recGet).
local function recDelete(key, id)
  local removed = redis.call('HDEL', key, id)
  if key ~= recLegacy then recDelta = recDelta - removed end
end

-- Deletes the record of a dead job wherever it is (in the jobs HASH since
-- its claim, as a rule); 1 if it had one, else 0.
local function recRemove(id)
  if recLegacyExists() and redis.call('HDEL', recLegacy, id) == 1 then return 1 end
  if not recGroupsInUse() then return 0 end
  local removed = redis.call('HDEL', recGroup(id), id)
  recDelta = recDelta - removed
  return removed
end

-- Claimed records: written to the jobs HASH (a job in flight is short-lived,
-- its token takes most records past 64 B, and ack, nack and extend then find
-- it with one HMGET per call), each out of its group if it was in one.
-- `pairs` is id, record, id, record ...; `keys` where each was found.
local function recFly(pairs, keys)
  for i = 1, #keys do
    if keys[i] ~= recLegacy then recDelete(keys[i], pairs[2 * i - 1]) end
  end
  callChunked('HSET', recLegacy, pairs, 2)
  if #pairs > 0 then recLegacyLive = true end
end

-- Splits group p (see the header) and moves p on.
local function recSplitOne()
  local size = 2 ^ recLevel
  local from = recPrefix .. string.format('%d', recSplit)
  local to = recPrefix .. string.format('%d', recSplit + size)
  local all = redis.call('HGETALL', from)
  local moved, ids = {}, {}
  for i = 1, #all, 2 do
    if recHash(all[i]) % (size * 2) ~= recSplit then
      moved[#moved + 1] = all[i]; moved[#moved + 1] = all[i + 1]
      ids[#ids + 1] = all[i]
    end
  end
  callChunked('HSET', to, moved, 2)
  callChunked('HDEL', from, ids)
  recSplit = recSplit + 1
  if recSplit == size then
    recLevel = recLevel + 1
    recSplit = 0
  end
end

-- Splits until the groups have room for `extra` more records at REC_LOAD
-- each. Only before a script's first lookup, or in recDone (the groups' keys
-- change). The new level and split pointer are saved at once: a script that
-- returns early (a stale nack) must not leave records moved by a split that
-- the state does not know of, where no lookup would find them. Returns
-- whether it split (and so saved the count too).
local function recReserve(extra)
  local split = false
  while recCount + extra > (2 ^ recLevel + recSplit) * REC_LOAD do
    recSplitOne()
    split = true
  end
  if split then
    redis.call('HSET', recMeta, 'n', string.format('%d', recCount), 'l', string.format('%d', recLevel), 'p', string.format('%d', recSplit))
  end
  return split
end

-- Before the first lookup of a script that may move up to `n` records into
-- their groups (a schedule's new records, a retry's, a release's or a
-- redrive's records written back as pending): room for them, so that no group
-- fills past its share before recDone splits (a group past the server's
-- hash-max-listpack-entries would stay a hashtable for good).
local function recMakeRoom(n)
  if recGrouped then recReserve(n) end
end

-- Every script that changed records calls this last: keeps n (R2) and
-- splits groups while they hold more than REC_LOAD records on average. A
-- script that changed no record may return without it.
local function recDone()
  recCount = recCount + recDelta
  local moved = recDelta ~= 0
  recDelta = 0
  if not recReserve(0) and moved then redis.call('HSET', recMeta, 'n', string.format('%d', recCount)) end
end

-- Records in the shard: the groups' count and the legacy HASH's.
local function recTotal()
  return recCount + redis.call('HLEN', recLegacy)
end
