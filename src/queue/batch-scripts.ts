// Typed wrappers of the batcher's Lua scripts (lua/batch-*.lua).
import type { BatcherShardKeys } from './keys.js';
import { call, type RedisClient } from './scripts.js';

export type TakenItem = { item: string; arrivedAt: number };

function pairs(flat: (string | number)[], from: number, count: number): TakenItem[] {
  const out: TakenItem[] = [];
  for (let i = 0; i < count; i++) out.push({ item: String(flat[from + 2 * i]), arrivedAt: Number(flat[from + 2 * i + 1]) });
  return out;
}

export async function runBatchAdd(
  redis: RedisClient,
  k: BatcherShardKeys,
  group: string,
  item: string,
  batchSize: number,
  arrivedAt: number | undefined,
): Promise<{ added: boolean; waiting: number; taken: TakenItem[] }> {
  const args = [k.itemsPrefix + group, k.groups, group, item, batchSize, k.wake, arrivedAt ?? ''];
  const r = (await call(redis, 'bqAdd', args)) as (string | number)[];
  return { added: Number(r[0]) === 1, waiting: Number(r[1]), taken: pairs(r, 3, Number(r[2])) };
}

export type DueBatch = { group: string; items: TakenItem[] };

export async function runBatchTakeDue(
  redis: RedisClient,
  k: BatcherShardKeys,
  maxWaitMs: number,
  maxGroups: number,
  batchSize: number,
): Promise<{ now: number; nextFirstArrival: number | null; batches: DueBatch[] }> {
  const r = (await call(redis, 'bqTakeDue', [k.groups, k.itemsPrefix, maxWaitMs, maxGroups, batchSize])) as (string | number)[];
  const batches: DueBatch[] = [];
  let i = 3;
  for (let g = 0; g < Number(r[2]); g++) {
    const group = String(r[i]);
    const count = Number(r[i + 1]);
    batches.push({ group, items: pairs(r, i + 2, count) });
    i += 2 + 2 * count;
  }
  const next = Number(r[1]);
  return { now: Number(r[0]), nextFirstArrival: next < 0 ? null : next, batches };
}

export async function runBatchRemove(redis: RedisClient, k: BatcherShardKeys, group: string, items: readonly string[]): Promise<number> {
  if (items.length === 0) return 0;
  return Number(await call(redis, 'bqRemove', [k.itemsPrefix + group, k.groups, group, ...items]));
}

export async function runBatchRestore(redis: RedisClient, k: BatcherShardKeys, group: string, items: readonly TakenItem[]): Promise<void> {
  if (items.length === 0) return;
  await call(redis, 'bqRestore', [k.itemsPrefix + group, k.groups, group, ...items.flatMap((t) => [t.arrivedAt, t.item])]);
}
