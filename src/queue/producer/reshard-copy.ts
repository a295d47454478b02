// The mover's way on a Redis Cluster, where a job's old and new shards are in
// different slots and no one script may touch both: copy, remove, settle
// (lua/queue/move-in.lua, move-out.lua, move-settle.lua). The copy is not
// claimable until settled, so the job runs from one shard only; the old copy
// goes only if unchanged, else the new one is taken back. Three rules make a
// stop, a second mover or a failover between the steps harmless:
//   - every step runs only for the shards' latest mover (move-fence.lua), so
//     a mover that stalled past its lock changes nothing once another began;
//   - the old shard keeps a proof of each job the mover removed (moved-out),
//     and the copies a stopped mover left are filed on that proof only: a job
//     gone from its old shard because it ran or was cancelled is not run again;
//   - each step's writes reach a replica (WAIT) before the next step relies
//     on them: a copy not yet on a replica is taken back, not filed.
import { type ShardKeys, movedOutKey, movingCopiesKey, shardOf } from '../keys.js';
import { parseRecord } from '../record.js';
import type { RedisClient } from '../redis-client.js';
import { runInspect } from '../scripts/admin-scripts.js';
import { type CopiedJob, type MoveReply, runMoveIn, runMoveOut, runMoveSettle } from '../scripts/move-scripts.js';

export type CopyMover = {
  readonly redis: RedisClient;
  /** This mover's generation (move-fence.lua). */
  readonly gen: number;
  readonly recordGroups: boolean;
  /** How long a step waits for a replica to acknowledge its writes (ms). */
  readonly replicaWaitMs: number;
};

export type CopyReply = MoveReply & {
  /** Copies taken back because no replica acknowledged them in time: moved in a later pass. */
  unreplicated: number;
};

/** Moves `ids` (jobs of `from` whose new shard is `to`) in the three steps. */
export async function moveByCopy(m: CopyMover, from: ShardKeys, to: ShardKeys, ids: readonly string[]): Promise<CopyReply> {
  const { redis, gen } = m;
  const r: CopyReply = { moved: 0, inFlight: 0, dropped: 0, stuck: 0, unreplicated: 0 };
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
  const copied = await runMoveIn(redis, to, gen, jobs, m.recordGroups);
  if (copied.some(Boolean) && !(await replicated(redis, to, m.replicaWaitMs))) {
    // The old shard keeps every job: a failover now could lose the copies.
    const back = jobs.filter((_, i) => copied[i]).map((j) => ({ id: j.id, gone: false }));
    r.unreplicated += (await runMoveSettle(redis, to, gen, back)).takenBack;
    return r;
  }
  const gone = await runMoveOut(redis, from, gen, jobs);
  // Best effort: a removal lost with its master runs the job twice at worst, as any lost ack does.
  if (gone.some(Boolean)) await replicated(redis, from, m.replicaWaitMs);
  const settle: { id: string; gone: boolean }[] = [];
  jobs.forEach((j, i) => {
    if (copied[i]) settle.push({ id: j.id, gone: gone[i] === true });
    else if (gone[i]) r.dropped++; // the new shard had it: the later write
  });
  if (settle.length > 0) r.moved += (await runMoveSettle(redis, to, gen, settle)).filed;
  const removed = jobs.filter((_, i) => gone[i]).map((j) => j.id);
  // The proofs are needed until the settle is safe on a replica; else they stay until the change ends.
  if (removed.length > 0 && (await replicated(redis, to, m.replicaWaitMs))) await redis.zrem(movedOutKey(from), ...removed);
  return r;
}

/**
 * Settles the copies left in the new shards by a mover that stopped between
 * the steps (or whose settle a failover lost): filed where the old shard
 * holds the proof that the mover removed the job, taken back everywhere else
 * (a later pass moves it if the old shard still has it).
 */
export async function settleLeftCopies(m: CopyMover, keys: readonly ShardKeys[], from: number, to: number): Promise<number> {
  const { redis, gen } = m;
  let settled = 0;
  for (let t = 0; t < to; t++) {
    const k = keys[t] as ShardKeys;
    const ids = await redis.zrange(movingCopiesKey(k), 0, -1);
    if (ids.length === 0) continue;
    const proofs = await Promise.all(ids.map((id) => redis.zscore(movedOutKey(keys[shardOf(id, from)] as ShardKeys), id)));
    const r = await runMoveSettle(
      redis,
      k,
      gen,
      ids.map((id, i) => ({ id, gone: proofs[i] !== null })),
    );
    settled += r.filed + r.takenBack;
  }
  return settled;
}

/** Drops every shard's proofs of removal: at the start of a change and once it has settled every copy. */
export async function forgetMovedOut(redis: RedisClient, keys: readonly ShardKeys[]): Promise<void> {
  await Promise.all(keys.map((k) => redis.del(movedOutKey(k))));
}

/**
 * Whether a replica of the master holding shard `k` has acknowledged the
 * writes this client sent it so far (WAIT, through the connection the
 * mover's scripts used: a pipeline goes to the slot of its keyed command).
 * True at once when the master has no replica: there is no failover to lose
 * the write to.
 */
export async function replicated(redis: RedisClient, k: ShardKeys, timeoutMs: number): Promise<boolean> {
  const role = await redis.pipeline().exists(k.records).call('ROLE').exec();
  const replicas = (role?.[1]?.[1] as unknown[] | undefined)?.[2];
  if (!Array.isArray(replicas) || replicas.length === 0) return true;
  const acked = await redis.pipeline().exists(k.records).call('WAIT', 1, timeoutMs).exec();
  return Number(acked?.[1]?.[1] ?? 0) >= 1;
}

function readable(record: string): boolean {
  try {
    parseRecord(record);
    return true;
  } catch {
    return false;
  }
}
