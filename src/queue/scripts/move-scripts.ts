// The mover's scripts, typed: jobs out of their old shard into their new one
// during a change of the shard count (lua/queue/move.lua, one Redis server;
// move-fence, move-in, move-out, move-settle, a cluster), the shards' layout
// fence and the change's record and lock (reshard-step.lua, reshard-lock.lua).
import type { ShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { call } from './registry.js';

export type MoveReply = { moved: number; inFlight: number; dropped: number; stuck: number };

/** `ids`: jobs of `from` whose new shard is `to`. */
export async function runMove(redis: RedisClient, from: ShardKeys, to: ShardKeys, ids: readonly string[], recordGroups: boolean): Promise<MoveReply> {
  const keys = {
    ...from,
    toDue: to.due,
    toDueBuckets: to.dueBuckets,
    toJobs: to.jobs,
    toRecords: to.records,
    toRecordGroups: to.recordGroups,
    toDead: to.dead,
    toErrors: to.errors,
  };
  const r = (await call(redis, 'dqMove', keys, [to.wake, recordGroups ? '1' : '0', ...ids])) as number[];
  return { moved: Number(r[0]), inFlight: Number(r[1]), dropped: Number(r[2]), stuck: Number(r[3]) };
}

/** A job as the mover read it in its old shard: its record, and its time of death (0: pending). */
export type CopiedJob = { id: string; record: string; diedAt: number; lastError: string | null };

/** A later mover fenced the shard (lua/queue/move-fence.lua): this one must stop, having changed nothing there. */
export class StaleMoverError extends Error {
  constructor(gen: number) {
    super(`a later mover took the shards over (this one is generation ${gen}); run it again`);
  }
}

/** Makes generation `gen` the shard's owning mover unless a later one is (lua/queue/move-fence.lua); the shard's generation after. */
export async function runMoveFence(redis: RedisClient, k: ShardKeys, gen: number): Promise<number> {
  return Number(await call(redis, 'dqMoveFence', k, [gen]));
}

/** Copies into the new shard, not yet claimable (lua/queue/move-in.lua); per job true when copied, false when the shard has the job. */
export async function runMoveIn(redis: RedisClient, to: ShardKeys, gen: number, jobs: readonly CopiedJob[], recordGroups: boolean): Promise<boolean[]> {
  const args: (string | number)[] = [recordGroups ? '1' : '0', gen];
  for (const j of jobs) args.push(j.id, j.record, j.diedAt, j.lastError ?? '');
  const codes = String(await call(redis, 'dqMoveIn', to, args));
  if (codes === '-') throw new StaleMoverError(gen);
  return jobs.map((_, i) => codes[i] === '1');
}

/** Removes from the old shard the jobs still as copied, each leaving its proof (lua/queue/move-out.lua); per job whether it went. */
export async function runMoveOut(redis: RedisClient, from: ShardKeys, gen: number, jobs: readonly CopiedJob[]): Promise<boolean[]> {
  const args: (string | number)[] = [gen];
  for (const j of jobs) args.push(j.id, j.record, j.diedAt);
  const codes = String(await call(redis, 'dqMoveOut', from, args));
  if (codes === '-') throw new StaleMoverError(gen);
  return jobs.map((_, i) => codes[i] === '1');
}

/** Files the copies whose old copy went, takes back the others (lua/queue/move-settle.lua). */
export async function runMoveSettle(
  redis: RedisClient,
  to: ShardKeys,
  gen: number,
  outcomes: readonly { id: string; gone: boolean }[],
): Promise<{ filed: number; takenBack: number }> {
  const args: (string | number)[] = [to.wake, gen];
  for (const o of outcomes) args.push(o.id, o.gone ? 1 : 0);
  const r = (await call(redis, 'dqMoveSettle', to, args)) as number[];
  if (Number(r[0]) < 0) throw new StaleMoverError(gen);
  return { filed: Number(r[0]), takenBack: Number(r[1]) };
}

/** Raises the shard's layout epoch to `epoch` (lua/queue/layout-fence.lua); returns the shard's epoch after. */
export async function runLayoutFence(redis: RedisClient, k: ShardKeys, epoch: number): Promise<number> {
  return Number(await call(redis, 'dqLayoutFence', k, [epoch]));
}

export type ReshardLockKeys = { shardCount: string; reshard: string; reshardLock: string };

/** 1 recorded, 0 lock lost, -1 the record is not in phase `expect` (lua/queue/reshard-step.lua). */
export async function runReshardStep(
  redis: RedisClient,
  k: ReshardLockKeys,
  token: string,
  step: { expect: 'steady' | 'poll' | 'move'; from: number; to: number; phase: 'poll' | 'move' | 'done'; epoch: number },
): Promise<number> {
  return Number(await call(redis, 'dqReshardStep', k, [token, step.expect, step.from, step.to, step.phase, step.epoch]));
}

/** Renews the lock for `ms` (0: releases it) if it is still `token`'s (lua/queue/reshard-lock.lua). */
export async function runReshardLock(redis: RedisClient, k: ReshardLockKeys, token: string, ms: number): Promise<boolean> {
  return Number(await call(redis, 'dqReshardLock', k, [token, ms])) === 1;
}
