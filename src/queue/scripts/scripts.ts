// The worker's scripts, typed: claim, then ack, nack, extend and release, each
// fenced by the delivery's token (a reclaimed delivery changes nothing).
import type { ShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { call } from './registry.js';

/** How long a due job may wait behind jobs of higher priority before it is claimed by due time alone (ms). */
export const DEFAULT_PRIORITY_AGING_MS = 10_000;

export type { RedisClient };

export type ClaimedRaw = { id: string; dueAt: number; record: string };
export type ClaimReply = {
  now: number;
  /** The claim ran after its deadline and changed nothing. */
  late: boolean;
  nextDue: number | null;
  nextLease: number | null;
  reclaimed: number;
  /** Due jobs of paused types set aside by this claim (more due jobs may wait behind them). */
  parked: number;
  /** The whole queue is paused: nothing was claimed (nextDue is then null). */
  paused: boolean;
  jobs: ClaimedRaw[];
};

/**
 * `deadline`: ms since epoch on the Redis clock after which the claim must
 * change nothing (null: none). `agingMs`: jobs due longer ago than this are
 * claimed first, oldest first, whatever their priority (null: strict priority).
 */
export async function runClaim(
  redis: RedisClient,
  k: ShardKeys,
  max: number,
  leaseMs: number,
  maxReclaim: number,
  deadline: number | null = null,
  agingMs: number | null = DEFAULT_PRIORITY_AGING_MS,
): Promise<ClaimReply> {
  const args = [max, leaseMs, maxReclaim, deadline === null ? '' : Math.floor(deadline), agingMs === null ? '' : Math.floor(agingMs)];
  const r = (await call(redis, 'dqClaim', k, args)) as (string | number)[];
  const jobs: ClaimedRaw[] = [];
  for (let i = 5; i < r.length; i += 3) {
    jobs.push({ id: String(r[i]), dueAt: Number(r[i + 1]), record: String(r[i + 2]) });
  }
  const orNull = (v: unknown) => (Number(v) < 0 ? null : Number(v));
  const late = Number(r[3]) < 0;
  const parked = Number(r[4]);
  return {
    now: Number(r[0]),
    late,
    nextDue: orNull(r[1]),
    nextLease: orNull(r[2]),
    reclaimed: late ? 0 : Number(r[3]),
    parked: Math.max(0, parked),
    paused: parked < 0,
    jobs,
  };
}

/** Returns the ids whose token no longer matched (nothing was changed for them). */
export async function runAck(redis: RedisClient, k: ShardKeys, items: readonly { id: string; token: number }[]): Promise<{ acked: number; stale: string[] }> {
  const args: (string | number)[] = [];
  for (const it of items) args.push(it.id, it.token);
  const r = (await call(redis, 'dqAck', k, args)) as (string | number)[];
  return { acked: Number(r[0]), stale: r.slice(1).map(String) };
}

export const NackCode = { STALE: 0, RETRY: 1, DEAD: 2 } as const;
export type NackCode = (typeof NackCode)[keyof typeof NackCode];

export async function runNack(
  redis: RedisClient,
  k: ShardKeys,
  id: string,
  token: number,
  outcome: 'retry' | 'dead',
  delayMs: number,
  error: string,
): Promise<{ code: NackCode; at: number }> {
  const r = (await call(redis, 'dqNack', k, [k.wake, id, token, outcome, delayMs, error])) as number[];
  return { code: r[0] as NackCode, at: Number(r[1]) };
}

/** Returns the new lease deadline (ms), or null when the lease is lost. */
export async function runExtend(redis: RedisClient, k: ShardKeys, id: string, token: number, leaseMs: number): Promise<number | null> {
  const r = Number(await call(redis, 'dqExtend', k, [id, token, leaseMs]));
  return r > 0 ? r : null;
}

/** `when`: a delay from the Redis clock's now (default 0), or an absolute due time. */
export async function runRelease(
  redis: RedisClient,
  k: ShardKeys,
  items: readonly { id: string; token: number }[],
  when: { delayMs: number } | { at: number } = { delayMs: 0 },
): Promise<number> {
  const time = 'at' in when ? ['at', Math.floor(when.at)] : ['in', Math.max(0, Math.ceil(when.delayMs))];
  const args: (string | number)[] = [k.wake, ...time];
  for (const it of items) args.push(it.id, it.token);
  return Number(await call(redis, 'dqRelease', k, args));
}
