// Changes a queue's shard count while the service runs (npm run reshard):
// every job whose shard changes (pending, parked, dead, and in flight once its
// delivery ends) is moved to its new shard, without loss or a second copy.
//   1. poll   the change is recorded (shard-layout.ts); within a refresh every
//             worker polls the shards of both counts, producers still write
//             by the old count
//   2. move   producers write by the new count and look jobs up in both
//             shards, old first (moving-writes.ts); this mover takes each job
//             out of its old shard into its new one in one script
//             (lua/queue/move.lua), pass after pass, until a pass finds
//             nothing left to move and nothing in flight waiting to
//   3. done   the new count is stored and the change marked done in one
//             transaction; processes that still act on 'move' for up to a
//             refresh find nothing in the old shards
// Each step waits longer than a refresh before the next, so no process acts on
// a layout two steps old. A mover that stopped is run again with the same
// target and carries on. On one Redis server a job moves in one script
// (lua/queue/move.lua); on a Redis Cluster, where its two shards are in two
// slots, by copy, remove and settle (reshard-copy.ts), each mover fencing
// every shard with a generation of its own first, so a mover that stalled past
// its lock changes nothing after another one began.
import { type ShardKeys, parseRecordGroupsState, recordGroupCount, reshardGenKey, reshardKey, reshardLockKey, shardCountKey, shardOf } from '../keys.js';
import { type RedisClient, isCluster } from '../redis-client.js';
import { StaleMoverError, runLayoutFence, runMove, runMoveFence, runReshardLock, runReshardStep } from '../scripts/move-scripts.js';
import { alignPauseState, copyPauseState } from './reshard-pause.js';
import { type CopyMover, forgetMovedOut, moveByCopy, settleLeftCopies } from './reshard-copy.js';
import { runClaim } from '../scripts/scripts.js';
import { LAYOUT_CHANGED, LAYOUT_REFRESH_MS, createShardLayout, parseLayout } from '../shard-layout.js';
import type { QueueLogger } from '../types.js';
import { silentLogger } from '../types.js';

export class ReshardError extends Error {}

export type ReshardOptions = {
  readonly log?: QueueLogger;
  /** Wait between the steps (ms); longer than a layout refresh. Default 2.5 s. */
  readonly settleMs?: number;
  /** Jobs per move call. Default 500. */
  readonly batch?: number;
  /** Wait between passes while jobs in flight hold it up (ms). Default 500. */
  readonly waitMs?: number;
  /** Whether moved records go into the new shards' record groups (QUEUE_RECORD_GROUPS). */
  readonly recordGroups?: boolean;
  /**
   * Move by copy, remove and settle (reshard-copy.ts), the way a Redis
   * Cluster needs, instead of one script per batch. Default: on a cluster.
   */
  readonly copy?: boolean;
  /** By copy: how long a step waits for a replica to acknowledge its writes before the next relies on them (ms). Default 2 s. */
  readonly replicaWaitMs?: number;
};

export type ReshardResult = { from: number; to: number; moved: number; dropped: number; stuck: number; passes: number };

const LOCK_MS = 30_000;
/**
 * With record groups on, a job claimed and handed back while one pass reads
 * its shard can slip past that pass (its record went from its group to the
 * jobs HASH and back); a second clean pass in a row makes that twice as
 * unlikely (README.md of this folder: Changing the shard count).
 */
const CLEAN_PASSES = 2;
const SCAN_COUNT = 1_000;
/** Record groups read at once. */
const GROUPS_AT_ONCE = 100;

export async function reshard(redis: RedisClient, q: { prefix: string; name: string }, to: number, o: ReshardOptions = {}): Promise<ReshardResult> {
  const log = o.log ?? silentLogger;
  const settleMs = o.settleMs ?? 2 * LAYOUT_REFRESH_MS + 500;
  if (!Number.isInteger(to) || to < 1 || to > 1024) throw new ReshardError(`the new shard count must be 1..1024: ${to}`);
  const stateKey = reshardKey(q.prefix, q.name);
  const [count, move] = await Promise.all([redis.get(shardCountKey(q.prefix, q.name)), redis.hgetall(stateKey)]);
  if (count === null && move.to === undefined) {
    throw new ReshardError(`queue ${q.name} has no stored shard count: start the service once (it records the count), then reshard`);
  }
  let layout = parseLayout(count, move, 0);
  if (layout.phase !== 'steady' && layout.to !== to) {
    throw new ReshardError(`queue ${q.name} is being changed to ${layout.to} shards: run it again with --to ${layout.to} to finish that first`);
  }
  const from = layout.from;
  const result: ReshardResult = { from, to, moved: 0, dropped: 0, stuck: 0, passes: 0 };
  if (layout.phase === 'steady' && from === to) return result;

  const token = `${process.pid}:${Date.now()}`;
  const lock = { shardCount: shardCountKey(q.prefix, q.name), reshard: stateKey, reshardLock: reshardLockKey(q.prefix, q.name) };
  if ((await redis.set(lock.reshardLock, token, 'PX', LOCK_MS, 'NX')) !== 'OK') {
    throw new ReshardError(`another reshard of ${q.name} holds it (the lock expires ${LOCK_MS / 1000} s after its mover stops)`);
  }
  const renew = async () => {
    if (!(await runReshardLock(redis, lock, token, LOCK_MS))) throw new ReshardError('lost the reshard lock (this mover stalled past it); run it again');
  };
  // Every write of the record checks the lock and the phase in one script: a
  // mover that stalled past its lock cannot overwrite a newer one's record.
  const step = async (expect: 'steady' | 'poll' | 'move', phase: 'poll' | 'move' | 'done', epoch: number) => {
    const r = await runReshardStep(redis, lock, token, { expect, from, to, phase, epoch });
    if (r === 0) throw new ReshardError('lost the reshard lock (this mover stalled past it); run it again');
    if (r < 0) throw new ReshardError(`the change of ${q.name} is no longer ${from} -> ${to} in phase ${expect}: another mover went on; run it again`);
  };
  const keys = createShardLayout(redis, q.prefix, q.name, Math.max(from, to)).keys;
  const shards = Math.max(from, to);
  const announce = () => Promise.all(keys.map((k) => redis.publish(k.wake, String(LAYOUT_CHANGED))));
  const settle = async () => {
    await announce();
    await sleep(settleMs);
    await renew();
  };
  const alignPause = async () => {
    const r = await alignPauseState(redis, keys, shards);
    if (r === false) throw new ReshardError(`the pause state of ${q.name} kept changing while the shards were aligned; run it again`);
    if (r > 0) log.info({ queue: q.name, repaired: r }, 'reshard: shards paused unlike shard 0 made like it');
  };
  // Raises every old and new shard's layout epoch: from here on a shard
  // refuses writes by the old layout (lua/queue/schedule.lua, cancel.lua).
  const fence = (epoch: number) => Promise.all(keys.slice(0, shards).map((k) => runLayoutFence(redis, k, epoch)));
  let epoch = layout.epoch;
  const byCopy = o.copy ?? isCluster(redis);
  try {
    const mover = byCopy ? await takeShardsOver(redis, q, keys.slice(0, shards), o, renew) : undefined;
    if (layout.phase === 'steady') {
      // Proofs of removal a finished change left (its end stopped before it dropped them).
      if (mover) await forgetMovedOut(redis, keys.slice(0, shards));
      await copyPauseState(redis, keys, from, to);
      await step('steady', 'poll', epoch);
      log.info({ queue: q.name, from, to }, 'reshard: workers poll both layouts');
      await settle();
      layout = { from, to, phase: 'poll', epoch };
    }
    if (layout.phase === 'poll') {
      // Every process reads 'poll' now, so pauses and resumes reach the new shards too.
      await alignPause();
      epoch++;
      await fence(epoch);
      await step('poll', 'move', epoch);
      log.info({ queue: q.name, from, to }, 'reshard: producers write by the new count; moving jobs');
      await settle();
    } else {
      await fence(epoch); // again: a mover stopped half way may not have fenced every shard
    }
    if (mover) {
      const left = await settleLeftCopies(mover, keys, from, to);
      if (left > 0) log.info({ queue: q.name, settled: left }, 'reshard: settled the copies a stopped mover left');
    }
    // Done after CLEAN_PASSES passes in a row found nothing to move and
    // nothing in flight to wait for, and the shards dropped hold no record.
    // (An unreadable record, stuck, never moves: reported, not waited for.)
    for (let clean = 0; clean < CLEAN_PASSES || (result.stuck === 0 && !(await droppedEmpty(redis, keys, from, to)));) {
      result.passes++;
      const pass = await movePass(redis, keys, from, to, o, mover, renew);
      // A copy whose settle a failover lost is filed or taken back here (none otherwise).
      const left = mover ? await settleLeftCopies(mover, keys, from, to) : 0;
      result.moved += pass.moved;
      result.dropped += pass.dropped;
      result.stuck = pass.stuck;
      log.info({ queue: q.name, ...pass, settled: left, pass: result.passes }, 'reshard: pass done');
      if (pass.unreplicated > 0) log.warn({ queue: q.name, copies: pass.unreplicated }, 'reshard: copies no replica acknowledged in time taken back');
      // A job kept in its old shard (changed since it was read) is still to move: the pass is not clean.
      clean = pass.moved + pass.dropped + pass.inFlight + pass.unreplicated + pass.kept + left === 0 ? clean + 1 : 0;
      if (pass.moved + pass.dropped === 0) await sleep(o.waitMs ?? 500);
      await renew();
    }
    await alignPause();
    // The record stays as 'done': the start-up check then knows the stored count was set by a reshard.
    await step('move', 'done', epoch);
    if (mover) await forgetMovedOut(redis, keys.slice(0, shards));
    await announce();
    if (result.stuck > 0) log.warn({ queue: q.name, stuck: result.stuck }, 'reshard: unreadable job records left in their old shards');
    log.info({ queue: q.name, ...result }, 'reshard: done; the new shard count is stored');
    return result;
  } catch (err) {
    if (err instanceof StaleMoverError) throw new ReshardError(err.message);
    throw err;
  } finally {
    await runReshardLock(redis, lock, token, 0);
  }
}

/**
 * Fences every old and new shard with a new generation (lua/queue/move-fence.lua)
 * before the mover copies anything by copy: from then on a mover that
 * stalled past its lock is refused in every shard. The lock is checked after,
 * so a mover that lost it stops before it relies on shards it fenced late.
 */
async function takeShardsOver(
  redis: RedisClient,
  q: { prefix: string; name: string },
  keys: readonly ShardKeys[],
  o: ReshardOptions,
  renew: () => Promise<void>,
): Promise<CopyMover> {
  const gen = await redis.incr(reshardGenKey(q.prefix, q.name));
  const owners = await Promise.all(keys.map((k) => runMoveFence(redis, k, gen)));
  if (owners.some((g) => g !== gen)) throw new StaleMoverError(gen);
  await renew();
  return { redis, gen, recordGroups: o.recordGroups ?? false, replicaWaitMs: o.replicaWaitMs ?? 2_000, replicas: new Map() };
}

/** Whether the shards the new count drops hold no record (read in one transaction: at one instant). */
async function droppedEmpty(redis: RedisClient, keys: readonly ShardKeys[], from: number, to: number): Promise<boolean> {
  for (let s = to; s < from; s++) {
    const k = keys[s] as ShardKeys;
    const r = await redis.multi().hlen(k.jobs).hget(k.records, 'n').exec();
    if (Number(r?.[0]?.[1] ?? 1) > 0 || Number(r?.[1]?.[1] ?? 0) > 0) return false;
  }
  return true;
}

type Pass = { moved: number; dropped: number; inFlight: number; stuck: number; unreplicated: number; kept: number };

/** One look at every old shard: expired leases back to due, then every job whose shard changes moved. */
async function movePass(
  redis: RedisClient,
  keys: readonly ShardKeys[],
  from: number,
  to: number,
  o: ReshardOptions,
  mover: CopyMover | undefined,
  renew: () => Promise<void>,
): Promise<Pass> {
  const pass: Pass = { moved: 0, dropped: 0, inFlight: 0, stuck: 0, unreplicated: 0, kept: 0 };
  const batch = o.batch ?? 500;
  for (let s = 0; s < from; s++) {
    const k = keys[s] as ShardKeys;
    // Claims nothing (max 0): only leases whose worker is gone go back to due, to be moved.
    await runClaim(redis, k, 0, 1, 1_000);
    for await (const ids of recordIds(redis, k)) {
      await renew(); // a long pass keeps the lock, and stops if another mover took it
      const byTarget = new Map<number, string[]>();
      for (const id of ids) {
        const t = shardOf(id, to);
        if (t === s) continue;
        const list = byTarget.get(t);
        if (list) list.push(id);
        else byTarget.set(t, [id]);
      }
      for (const [t, list] of byTarget) {
        for (let i = 0; i < list.length; i += batch) {
          const part = list.slice(i, i + batch);
          const target = keys[t] as ShardKeys;
          const r = mover
            ? await moveByCopy(mover, k, target, part)
            : { ...(await runMove(redis, k, target, part, o.recordGroups ?? false)), unreplicated: 0, kept: 0 };
          pass.unreplicated += r.unreplicated;
          pass.kept += r.kept;
          pass.moved += r.moved;
          pass.dropped += r.dropped;
          pass.inFlight += r.inFlight;
          pass.stuck += r.stuck;
        }
      }
    }
  }
  return pass;
}

/**
 * The ids of every job with a record in the shard, a page at a time: each
 * record group, then the jobs HASH by HSCAN (a record there through the whole
 * scan is returned). A job of the shard has exactly one record
 * (lib/records.lua), whatever its state. Groups first: a pending job claimed
 * meanwhile has gone to the jobs HASH, read after, and is counted in flight.
 */
async function* recordIds(redis: RedisClient, k: ShardKeys): AsyncGenerator<string[]> {
  const groups = recordGroupCount(parseRecordGroupsState(await redis.hgetall(k.records)));
  for (let g = 0; g < groups; g += GROUPS_AT_ONCE) {
    const names = Array.from({ length: Math.min(GROUPS_AT_ONCE, groups - g) }, (_, j) => `${k.recordGroups}${g + j}`);
    const ids = (await Promise.all(names.map((n) => redis.hkeys(n)))).flat();
    if (ids.length > 0) yield ids;
  }
  let cursor = '0';
  do {
    const [next, flat] = await redis.hscan(k.jobs, cursor, 'COUNT', SCAN_COUNT);
    cursor = next;
    const ids = flat.filter((_, i) => i % 2 === 0);
    if (ids.length > 0) yield ids;
  } while (cursor !== '0');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
