// Typed wrappers of the batcher's Lua scripts (lua/batcher/*.lua).
import type { BatcherShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { call } from './registry.js';

export type TakenItem = { item: string; arrivedAt: number };

function pairs(flat: (string | number)[], from: number, count: number): TakenItem[] {
  const out: TakenItem[] = [];
  for (let i = 0; i < count; i++) out.push({ item: String(flat[from + 2 * i]), arrivedAt: Number(flat[from + 2 * i + 1]) });
  return out;
}

/** `deadline`: ms on the Redis clock past which the call must change nothing (null: none); `late` says it did. */
export async function runBatchAdd(
  redis: RedisClient,
  k: BatcherShardKeys,
  group: string,
  item: string,
  batchSize: number,
  arrivedAt: number | undefined,
  deadline: number | null,
): Promise<{ now: number; late: boolean; added: boolean; waiting: number; taken: TakenItem[] }> {
  const args = [k.wake, group, item, batchSize, arrivedAt ?? '', deadline === null ? '' : Math.floor(deadline)];
  const r = (await call(redis, 'bqAdd', { groups: k.groups, items: k.itemsPrefix + group }, args)) as (string | number)[];
  const added = Number(r[1]);
  return { now: Number(r[0]), late: added < 0, added: added === 1, waiting: Number(r[2]), taken: pairs(r, 4, Number(r[3])) };
}

export type DueBatch = { group: string; items: TakenItem[] };

export async function runBatchTakeDue(
  redis: RedisClient,
  k: BatcherShardKeys,
  maxWaitMs: number,
  maxGroups: number,
  batchSize: number,
  deadline: number | null,
): Promise<{ now: number; late: boolean; nextFirstArrival: number | null; batches: DueBatch[] }> {
  const args = [maxWaitMs, maxGroups, batchSize, deadline === null ? '' : Math.floor(deadline)];
  const r = (await call(redis, 'bqTakeDue', { groups: k.groups, itemsPrefix: k.itemsPrefix }, args)) as (string | number)[];
  const batches: DueBatch[] = [];
  let i = 3;
  for (let g = 0; g < Number(r[2]); g++) {
    const group = String(r[i]);
    const count = Number(r[i + 1]);
    batches.push({ group, items: pairs(r, i + 2, count) });
    i += 2 + 2 * count;
  }
  const next = Number(r[1]);
  return { now: Number(r[0]), late: next === -2, nextFirstArrival: next < 0 ? null : next, batches };
}

export async function runBatchRemove(redis: RedisClient, k: BatcherShardKeys, group: string, items: readonly string[]): Promise<number> {
  if (items.length === 0) return 0;
  return Number(await call(redis, 'bqRemove', { groups: k.groups, items: k.itemsPrefix + group }, [group, ...items]));
}

/** `takeFullOf`: the batch size, to take every full batch after the put back; null to take none. */
export async function runBatchRestore(
  redis: RedisClient,
  k: BatcherShardKeys,
  group: string,
  items: readonly TakenItem[],
  takeFullOf: number | null,
): Promise<{ firstArrival: number | null; taken: TakenItem[] }> {
  if (items.length === 0) return { firstArrival: null, taken: [] };
  const args = [k.wake, group, takeFullOf ?? '', ...items.flatMap((t) => [t.arrivedAt, t.item])];
  const r = (await call(redis, 'bqRestore', { groups: k.groups, items: k.itemsPrefix + group }, args)) as (string | number)[];
  const first = Number(r[0]);
  return { firstArrival: first < 0 ? null : first, taken: pairs(r, 2, Number(r[1])) };
}
