// A bulk schedule while a change of the shard count moves jobs (phase 'move'
// of shard-layout.ts): a job whose old and new shards differ may still be in
// its old shard, and the mover (lua/queue/move.lua) takes it from there to its
// new one atomically, never back. So each mode looks where the job may be in
// an order that a move in between cannot fool:
//   nx       exists if the old shard has it; else nx in the new one (a job
//            moved meanwhile is found there)
//   xx, xp   in the old shard first; where it was not found, in the new one
//   upsert   written to the new shard, then the old copy cancelled (which
//            also fences a delivery of it in flight, as an upsert over one
//            shard does); a move in between finds the new copy and drops the old
//   A bulk that names one id twice goes in parts, each up to the id's next
//   mention, one after another: within a part the modes run in the order
//   above, which would let a later mention of an id overtake an earlier one.
// Every write carries the layout's epoch: a shard fenced by a later layout
// refuses it (null at its position), and the caller writes it again.
import { type ShardKeys, shardOf } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { runInspect } from '../scripts/admin-scripts.js';
import { CancelCode, runCancel } from '../scripts/schedule-scripts.js';
import type { Layout } from '../shard-layout.js';
import type { Prepared, ScheduleResult } from './schedule-input.js';

/** Writes the jobs at `idx` by hash mod `shards`; results at those positions (null: refused by the fence). */
export type WriteBy = (idx: readonly number[], shards: number) => Promise<(ScheduleResult | null)[]>;

type Writes = { readonly redis: RedisClient; readonly keys: readonly ShardKeys[] };

export async function scheduleWhileMoving(
  d: Writes,
  l: Layout,
  prepared: readonly Prepared[],
  todo: readonly number[],
  write: WriteBy,
): Promise<(ScheduleResult | null)[]> {
  const results = new Array<ScheduleResult | null>(prepared.length);
  for (const part of partsWithoutRepeats(prepared, todo)) {
    const got = await writePart(d, l, prepared, part, write);
    for (const i of part) results[i] = got[i] ?? null;
  }
  return results;
}

/** `todo` cut before each id's second mention in the part so far. */
function partsWithoutRepeats(prepared: readonly Prepared[], todo: readonly number[]): number[][] {
  const parts: number[][] = [];
  let part: number[] = [];
  let ids = new Set<string>();
  for (const i of todo) {
    const id = idOf(prepared, i);
    if (ids.has(id)) {
      parts.push(part);
      part = [];
      ids = new Set();
    }
    ids.add(id);
    part.push(i);
  }
  if (part.length > 0) parts.push(part);
  return parts;
}

async function writePart(d: Writes, l: Layout, prepared: readonly Prepared[], all: readonly number[], write: WriteBy): Promise<(ScheduleResult | null)[]> {
  const results = new Array<ScheduleResult | null | undefined>(prepared.length);
  const oldKeys = (i: number) => d.keys[shardOf(idOf(prepared, i), l.from)] as ShardKeys;
  const moving = (i: number) => shardOf(idOf(prepared, i), l.from) !== shardOf(idOf(prepared, i), l.to);
  const modeOf = (i: number) => (prepared[i] as Prepared).header.mode;

  const nxOld = all.filter((i) => modeOf(i) === 'nx' && moving(i));
  const seen = await Promise.all(nxOld.map((i) => runInspect(d.redis, oldKeys(i), idOf(prepared, i))));
  nxOld.forEach((i, j) => {
    const r = seen[j];
    if (r && r.record !== null) results[i] = { status: r.diedAt !== null ? 'dead' : 'exists', dueAt: 0 };
  });

  const xOld = all.filter((i) => (modeOf(i) === 'xx' || modeOf(i) === 'xp') && moving(i));
  const inOld = await write(xOld, l.from);
  for (const i of xOld) if (inOld[i]?.status !== 'not_found') results[i] = inOld[i] ?? null;

  const rest = all.filter((i) => results[i] === undefined);
  const inNew = await write(rest, l.to);
  for (const i of rest) results[i] = inNew[i] ?? null;

  const ups = rest.filter((i) => modeOf(i) === 'upsert' && moving(i) && results[i]);
  const codes = await Promise.all(ups.map((i) => runCancel(d.redis, oldKeys(i), idOf(prepared, i), l.epoch)));
  ups.forEach((i, j) => {
    const r = results[i];
    // Fenced: the old copy may stay; the upsert goes again by the new layout.
    if (codes[j] === CancelCode.STALE_LAYOUT) results[i] = null;
    else if (codes[j] !== CancelCode.NOT_FOUND && r?.status === 'created') results[i] = { ...r, status: 'updated' };
  });
  return results as (ScheduleResult | null)[];
}

const idOf = (prepared: readonly Prepared[], i: number) => (prepared[i] as Prepared).item.id;
