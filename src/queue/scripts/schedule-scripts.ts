// The producer's writes by id: schedule (bulk create or move) and cancel,
// with their replies mapped to codes.
import type { ShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { call } from './registry.js';

/** What a whole schedule call shares; sent once per call, not once per job. */
export type ScheduleHeader = {
  /** xp: only if pending (due, not in flight). */
  mode: 'upsert' | 'nx' | 'xx' | 'xp';
  timeKind: 'at' | 'in';
  /** '' keeps each job's current type and payload (reschedule). */
  type: string;
  maxAttempts: number | undefined;
  /** 0..9; undefined for the default (the record then names none). Not used when type is '' (a move keeps it). */
  priority: number | undefined;
};

export type ScheduleItem = {
  id: string;
  /** ms since epoch ("at") or ms from the Redis clock's now ("in"). */
  time: number;
  payload: string;
};

/** STALE_LAYOUT: the shard was fenced by a later layout (shard-layout.ts); nothing written, read the layout again. */
export const ScheduleCode = { CREATED: 1, UPDATED: 2, EXISTS: 3, NOT_FOUND: 4, DEAD: 5, STALE_LAYOUT: 6 } as const;
export type ScheduleCode = (typeof ScheduleCode)[keyof typeof ScheduleCode];

/** One reply per item, in order; dueAt is 0 when nothing was written. `epoch`: the layout's (shard-layout.ts) the caller acts on. */
export async function runSchedule(
  redis: RedisClient,
  k: ShardKeys,
  h: ScheduleHeader,
  items: readonly ScheduleItem[],
  recordGroups: boolean,
  epoch: number,
): Promise<{ code: ScheduleCode; dueAt: number }[]> {
  const args: (string | number)[] = [k.wake, items.length, h.mode, h.timeKind, h.type, h.maxAttempts ?? '', recordGroups ? '1' : '0', h.priority ?? '', epoch];
  for (const it of items) args.push(it.id, it.time, it.payload);
  const [now, codes] = (await call(redis, 'dqSchedule', k, args)) as [number, string];
  const base = h.timeKind === 'in' ? Number(now) : 0;
  const out = new Array<{ code: ScheduleCode; dueAt: number }>(items.length);
  for (let i = 0; i < items.length; i++) {
    const code = (codes.charCodeAt(i) - 48) as ScheduleCode;
    const written = code === ScheduleCode.CREATED || code === ScheduleCode.UPDATED;
    out[i] = { code, dueAt: written ? base + (items[i] as ScheduleItem).time : 0 };
  }
  return out;
}

/** STALE_LAYOUT: as ScheduleCode's; nothing removed. */
export const CancelCode = { STALE_LAYOUT: -1, NOT_FOUND: 0, PENDING: 1, IN_FLIGHT: 2, DEAD: 3 } as const;
export type CancelCode = (typeof CancelCode)[keyof typeof CancelCode];

export async function runCancel(redis: RedisClient, k: ShardKeys, id: string, epoch: number): Promise<CancelCode> {
  return Number(await call(redis, 'dqCancel', k, [id, epoch])) as CancelCode;
}
