// The mover's way on a Redis Cluster, where a job's old and new shards are in
// different slots and no one script may touch both: copy, remove, settle
// (lua/queue/move-in.lua, move-out.lua, move-settle.lua). The copy is not
// claimable until settled, so the job runs from one shard only; the old copy
// goes only if unchanged, else the new one is taken back. Also the repair of
// copies a mover that stopped between the steps left unsettled.
import { type ShardKeys, movingCopiesKey, shardOf } from '../keys.js';
import { parseRecord } from '../record.js';
import type { RedisClient } from '../redis-client.js';
import { runInspect } from '../scripts/admin-scripts.js';
import { type CopiedJob, type MoveReply, runMoveIn, runMoveOut, runMoveSettle } from '../scripts/move-scripts.js';

/** Moves `ids` (jobs of `from` whose new shard is `to`) in the three steps. */
export async function moveByCopy(redis: RedisClient, from: ShardKeys, to: ShardKeys, ids: readonly string[], recordGroups: boolean): Promise<MoveReply> {
  const r: MoveReply = { moved: 0, inFlight: 0, dropped: 0, stuck: 0 };
  const seen = await Promise.all(ids.map((id) => runInspect(redis, from, id)));
  const jobs: CopiedJob[] = [];
  ids.forEach((id, i) => {
    const s = seen[i];
    if (!s || s.record === null) return;
    if (s.leaseUntil !== null) r.inFlight++;
    else if (s.diedAt === null && !readable(s.record)) r.stuck++;
    else jobs.push({ id, record: s.record, diedAt: s.diedAt ?? 0, lastError: s.lastError });
  });
  if (jobs.length === 0) return r;
  const copied = await runMoveIn(redis, to, jobs, recordGroups);
  const gone = await runMoveOut(redis, from, jobs);
  const settle: { id: string; gone: boolean }[] = [];
  jobs.forEach((j, i) => {
    if (copied[i]) settle.push({ id: j.id, gone: gone[i] === true });
    else if (gone[i]) r.dropped++; // the new shard had it: the later write
  });
  if (settle.length > 0) r.moved += (await runMoveSettle(redis, to, settle)).filed;
  return r;
}

/**
 * Settles the copies left in the new shards by a mover that stopped between
 * the steps: filed where the old shard no longer has the job, taken back
 * where it still does (a later pass moves it).
 */
export async function settleLeftCopies(redis: RedisClient, keys: readonly ShardKeys[], from: number, to: number): Promise<number> {
  let settled = 0;
  for (let t = 0; t < to; t++) {
    const k = keys[t] as ShardKeys;
    const ids = await redis.zrange(movingCopiesKey(k), 0, -1);
    if (ids.length === 0) continue;
    const old = await Promise.all(ids.map((id) => runInspect(redis, keys[shardOf(id, from)] as ShardKeys, id)));
    const r = await runMoveSettle(
      redis,
      k,
      ids.map((id, i) => ({ id, gone: old[i]?.record === null })),
    );
    settled += r.filed + r.takenBack;
  }
  return settled;
}

function readable(record: string): boolean {
  try {
    parseRecord(record);
    return true;
  } catch {
    return false;
  }
}
