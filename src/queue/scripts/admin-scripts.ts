// The operator's scripts: look a job up, count a shard, the dead set (redrive,
// delete, trim past the retention) and moving records out of the record groups.
import type { ShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { call } from './registry.js';

export async function runRedrive(redis: RedisClient, k: ShardKeys, target: { id: string } | { max: number }): Promise<number> {
  const sel = 'id' in target ? ['one', target.id] : ['all', target.max];
  return Number(await call(redis, 'dqRedrive', k, [k.wake, ...sel]));
}

/**
 * Removes dead jobs older than `maxAgeMs`, then the oldest beyond `maxCount`
 * among those dead for at least `minAgeMs`, at most `limit`; returns how many.
 */
export async function runTrimDead(redis: RedisClient, k: ShardKeys, maxAgeMs: number, maxCount: number, limit: number, minAgeMs = 0): Promise<number> {
  return Number(await call(redis, 'dqTrimDead', k, [Math.floor(maxAgeMs), maxCount, limit, Math.floor(minAgeMs)]));
}

export async function runDeleteDead(redis: RedisClient, k: ShardKeys, ids: readonly string[]): Promise<number> {
  return Number(await call(redis, 'dqDeleteDead', k, ids));
}

export type InspectReply = {
  record: string | null;
  dueAt: number | null;
  leaseUntil: number | null;
  diedAt: number | null;
  lastError: string | null;
  /** Pending, but set aside while its type is paused (lua/lib/pause.lua). */
  parked: boolean;
};

export async function runInspect(redis: RedisClient, k: ShardKeys, id: string): Promise<InspectReply> {
  const r = (await call(redis, 'dqInspect', k, [id])) as (string | null)[];
  const num = (v: string | null | undefined) => (v == null ? null : Number(v));
  return {
    record: r[0] ?? null,
    dueAt: num(r[1]),
    leaseUntil: num(r[2]),
    diedAt: num(r[3]),
    lastError: r[4] ?? null,
    parked: Number(r[5] ?? 0) === 1,
  };
}

/**
 * Moves the records of up to `maxGroups` record groups, counting down from
 * `from` (null: the last), into the jobs HASH; next is -1 when none is left,
 * -2 when some were written behind the cursor (start again from the last).
 */
export async function runUngroup(redis: RedisClient, k: ShardKeys, from: number | null, maxGroups: number): Promise<{ moved: number; next: number }> {
  const r = (await call(redis, 'dqUngroup', k, [from === null ? '' : from, maxGroups])) as number[];
  return { moved: Number(r[0]), next: Number(r[1]) };
}

export type StatsReply = {
  now: number;
  pending: number;
  dueNow: number;
  inFlight: number;
  dead: number;
  nextDueAt: number | null;
  /** Pending jobs set aside while their type is paused (counted in pending, not in dueNow). */
  parked: number;
  /** '*' when the whole shard is paused, and the paused job types. */
  paused: string[];
};

/** `types`: the queue's job types, whose parked jobs are counted. */
export async function runStats(redis: RedisClient, k: ShardKeys, types: readonly string[]): Promise<StatsReply> {
  const raw = (await call(redis, 'dqStats', k, types)) as (number | string)[];
  const r = raw.slice(0, 7).map(Number);
  const pausedText = String(raw[7] ?? '');
  return {
    now: r[0] ?? 0,
    pending: r[1] ?? 0,
    dueNow: r[2] ?? 0,
    inFlight: r[3] ?? 0,
    dead: r[4] ?? 0,
    nextDueAt: (r[5] ?? -1) < 0 ? null : (r[5] ?? null),
    parked: r[6] ?? 0,
    paused: pausedText === '' ? [] : pausedText.split(','),
  };
}

/** `target`: '*' for the whole queue, or a job type the caller checked. */
export async function runPause(redis: RedisClient, k: ShardKeys, target: string): Promise<{ pausedAt: number; created: boolean }> {
  const r = (await call(redis, 'dqPause', k, [k.wake, target])) as number[];
  return { pausedAt: Number(r[0]), created: Number(r[1]) === 1 };
}

/**
 * Lifts the pause of `target` ('*' or a job type) when `unpause`, and moves
 * up to `max` of its parked jobs back to due; later calls (`unpause` false)
 * move the rest, and nothing while the target is paused again.
 */
export async function runResume(
  redis: RedisClient,
  k: ShardKeys,
  target: string,
  unpause: boolean,
  max: number,
): Promise<{ wasPaused: boolean; moved: number; left: number }> {
  const r = (await call(redis, 'dqResume', k, [k.wake, target, unpause ? '1' : '0', max])) as number[];
  return { wasPaused: Number(r[0]) === 1, moved: Number(r[1]), left: Number(r[2]) };
}

/** The shard's pause state as written: '*' or job type -> ms paused at. */
export async function readPaused(redis: RedisClient, k: ShardKeys): Promise<Record<string, number>> {
  const flat = await redis.hgetall(k.paused);
  return Object.fromEntries(Object.entries(flat).map(([f, v]) => [f, Number(v)]));
}
