// Typed wrappers of the batcher's Lua scripts (lua/batcher/*.lua).
import type { BatcherShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { call } from './registry.js';

export type TakenItem = { item: string; arrivedAt: number };

/** The batcher's defaults, for groups without a rule of their own. */
export type BatchDefaults = { batchSize: number; maxWaitMs: number };

/**
 * A group's own rule: its batch size and maximum wait (ms); null for the
 * batcher's default. A rule of two nulls is no rule. `version` (a whole
 * number >= 1, raised by the caller's source of truth with every change):
 * the scripts refuse a rule older than the one the group holds, so a put
 * back or a late call carrying a rule read before a newer one was set
 * cannot undo it. Without one, the rule is set whatever the group holds.
 */
export type GroupRule = { batchSize: number | null; maxWaitMs: number | null; version?: number | undefined };

/** A rule as the scripts take it (lua/lib/group.lua): "<size>,<wait ms>,<version>"; without a version "-" for none, else "<size>,<wait ms>". */
export function encodeRule(rule: GroupRule): string {
  if (rule.version !== undefined) return `${rule.batchSize ?? ''},${rule.maxWaitMs ?? ''},${rule.version}`;
  if (rule.batchSize === null && rule.maxWaitMs === null) return '-';
  return `${rule.batchSize ?? ''},${rule.maxWaitMs ?? ''}`;
}

/** A rule as the `groupRules` HASH holds it; null for a value it never writes. */
export function decodeRule(value: string): GroupRule | null {
  const m = /^(\d*),(\d*)(?:,(\d+))?$/.exec(value);
  if (!m) return null;
  return { batchSize: m[1] ? Number(m[1]) : null, maxWaitMs: m[2] ? Number(m[2]) : null, ...(m[3] && { version: Number(m[3]) }) };
}

function pairs(flat: (string | number)[], from: number, count: number): TakenItem[] {
  const out: TakenItem[] = [];
  for (let i = 0; i < count; i++) out.push({ item: String(flat[from + 2 * i]), arrivedAt: Number(flat[from + 2 * i + 1]) });
  return out;
}

const groupKeys = (k: BatcherShardKeys, group: string) => ({ groups: k.groups, groupRules: k.groupRules, items: k.itemsPrefix + group });

/** `deadline`: ms on the Redis clock past which the call must change nothing (null: none); `late` says it did. */
export async function runBatchAdd(
  redis: RedisClient,
  k: BatcherShardKeys,
  group: string,
  item: string,
  defaults: BatchDefaults,
  arrivedAt: number | undefined,
  deadline: number | null,
): Promise<{ now: number; late: boolean; added: boolean; waiting: number; size: number; taken: TakenItem[] }> {
  const args = [k.wake, group, item, defaults.batchSize, defaults.maxWaitMs, arrivedAt ?? '', deadline === null ? '' : Math.floor(deadline)];
  const r = (await call(redis, 'bqAdd', groupKeys(k, group), args)) as (string | number)[];
  const added = Number(r[1]);
  return { now: Number(r[0]), late: added < 0, added: added === 1, waiting: Number(r[2]), size: Number(r[3]), taken: pairs(r, 5, Number(r[4])) };
}

export type DueBatch = { group: string; items: TakenItem[] };

export async function runBatchTakeDue(
  redis: RedisClient,
  k: BatcherShardKeys,
  defaults: BatchDefaults,
  maxGroups: number,
  deadline: number | null,
): Promise<{ now: number; late: boolean; nextDeadline: number | null; batches: DueBatch[] }> {
  const args = [defaults.maxWaitMs, maxGroups, defaults.batchSize, deadline === null ? '' : Math.floor(deadline)];
  const keys = { groups: k.groups, groupRules: k.groupRules, itemsPrefix: k.itemsPrefix };
  const r = (await call(redis, 'bqTakeDue', keys, args)) as (string | number)[];
  const batches: DueBatch[] = [];
  let i = 3;
  for (let g = 0; g < Number(r[2]); g++) {
    const group = String(r[i]);
    const count = Number(r[i + 1]);
    batches.push({ group, items: pairs(r, i + 2, count) });
    i += 2 + 2 * count;
  }
  const next = Number(r[1]);
  return { now: Number(r[0]), late: next === -2, nextDeadline: next < 0 ? null : next, batches };
}

export async function runBatchRemove(
  redis: RedisClient,
  k: BatcherShardKeys,
  group: string,
  defaults: BatchDefaults,
  items: readonly string[],
): Promise<number> {
  if (items.length === 0) return 0;
  return Number(await call(redis, 'bqRemove', groupKeys(k, group), [group, defaults.maxWaitMs, ...items]));
}

/** What restore answers: the group's deadline and batch size after the call, and the full batches taken. */
export type GroupTake = { deadline: number | null; size: number; taken: TakenItem[] };

function groupTake(r: (string | number)[]): GroupTake {
  const deadline = Number(r[0]);
  return { deadline: deadline < 0 ? null : deadline, size: Number(r[1]), taken: pairs(r, 3, Number(r[2])) };
}

/**
 * `takeFull`: take every full batch after the put back. `rule`: the group's
 * rule to set first (undefined: leave it). No items with a rule: the rule's
 * change alone (restore.lua serves both).
 */
export async function runBatchRestore(
  redis: RedisClient,
  k: BatcherShardKeys,
  group: string,
  defaults: BatchDefaults,
  items: readonly TakenItem[],
  o: { takeFull: boolean; rule?: GroupRule | undefined },
): Promise<GroupTake> {
  const rule = o.rule === undefined ? '' : encodeRule(o.rule);
  const args = [k.wake, group, defaults.batchSize, defaults.maxWaitMs, o.takeFull ? '1' : '', rule, ...items.flatMap((t) => [t.arrivedAt, t.item])];
  return groupTake((await call(redis, 'bqRestore', groupKeys(k, group), args)) as (string | number)[]);
}
