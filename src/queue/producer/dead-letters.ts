// A queue's dead jobs: redrive (one, or the oldest of every shard), delete,
// trim past the retention, and paging through them across shards, oldest
// death first, with an opaque keyset cursor ("shard:diedAt:id" of the last job
// returned), so a page never repeats or skips a job while others die or are
// redriven.
import { QueueErrorCode, QueueInputError, invalidOptions } from '../errors.js';
import type { ShardKeys } from '../keys.js';
import { shardsOf } from '../shard-layout.js';
import type { JobInfo } from '../types.js';
import type { RedisClient } from '../redis-client.js';
import { runDeleteDead, runRedrive, runTrimDead } from '../scripts/admin-scripts.js';
import type { QueueSetup } from './queue-options.js';
import { checkId } from './schedule-input.js';

/** A dead job stays at least this long whatever the count (a relay must be able to see it die). */
const DEAD_MIN_AGE_MS = 10 * 60_000;
/** Dead jobs removed per trim call, and calls per shard per trim: a sweep stays short. */
const TRIM_CALL = 1_000;
const TRIM_CALLS = 10;

/** `get` is the queue's lookup: a listed job is shown as a lookup shows it. */
export function createDeadLetters(q: QueueSetup, get: (id: string) => Promise<JobInfo | null>) {
  const { redis, keys, layout, deadRetention } = q;

  /** Whether `op` succeeded in a shard the job may be in, old first while jobs move (shard-layout.ts). */
  async function inItsShards(id: string, op: (k: ShardKeys) => Promise<number>): Promise<boolean> {
    for (const sh of shardsOf(await layout.fresh(), id)) if ((await op(keys[sh] as ShardKeys)) === 1) return true;
    return false;
  }

  async function redrive(id: string): Promise<boolean> {
    checkId(id);
    return inItsShards(id, (k) => runRedrive(redis, k, { id }));
  }

  /** Redrive up to `max` of the oldest dead jobs per shard. */
  async function redriveAll(max = 1_000): Promise<number> {
    await layout.fresh(); // every shard of the stored count, which a reshard may have raised past the configured one
    const counts = await Promise.all(keys.map((k) => runRedrive(redis, k, { max })));
    return counts.reduce((a, b) => a + b, 0);
  }

  /** One page of dead jobs, oldest death first, across shards. */
  async function listDead(cursor: string | null, limit = 50): Promise<{ jobs: JobInfo[]; next: string | null }> {
    await layout.fresh(); // as redriveAll
    return listDeadPage({ redis, keys, get }, cursor, limit);
  }

  /** Removes dead jobs past the retention (a bounded number per shard); returns how many. */
  async function trimDead(): Promise<number> {
    await layout.fresh(); // as redriveAll
    let removed = 0;
    for (const k of keys) {
      for (let i = 0; i < TRIM_CALLS; i++) {
        const n = await runTrimDead(redis, k, deadRetention.maxAgeMs, deadRetention.maxCount, TRIM_CALL, DEAD_MIN_AGE_MS);
        removed += n;
        if (n < TRIM_CALL) break;
      }
    }
    return removed;
  }

  async function deleteDead(id: string): Promise<boolean> {
    checkId(id);
    return inItsShards(id, (k) => runDeleteDead(redis, k, [id]));
  }

  return { redrive, redriveAll, listDead, trimDead, deleteDead };
}

export async function listDeadPage(
  q: { redis: RedisClient; keys: readonly ShardKeys[]; get(id: string): Promise<JobInfo | null> },
  cursor: string | null,
  limit: number,
): Promise<{ jobs: JobInfo[]; next: string | null }> {
  const { redis, keys } = q;
  const shards = keys.length;
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) invalidOptions('limit must be 1..500');
  let shard = 0;
  let after: { diedAt: number; id: string } | null = null;
  if (cursor) {
    const m = /^(\d+):(\d+):(.+)$/.exec(cursor);
    if (!m || Number(m[1]) >= shards) throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, 'bad cursor');
    shard = Number(m[1]);
    after = { diedAt: Number(m[2]), id: m[3] as string };
  }
  const jobs: JobInfo[] = [];
  let lastShard = 0;
  for (; shard < shards && jobs.length < limit; shard++, after = null) {
    const k = keys[shard] as ShardKeys;
    // Keyset on (score, member): read from the cursor's score on, skipping what
    // was already returned (members of one score come in member order).
    const chunk = limit + 50;
    for (let offset = 0; jobs.length < limit; offset += chunk) {
      const raw = await redis.zrangebyscore(k.dead, after ? after.diedAt : '-inf', '+inf', 'WITHSCORES', 'LIMIT', offset, chunk);
      const ids: string[] = [];
      for (let i = 0; i < raw.length; i += 2) {
        const id = raw[i] as string;
        if (after && Number(raw[i + 1]) === after.diedAt && id <= after.id) continue;
        ids.push(id);
      }
      // Looked up together (pipelined), as many as the page still needs, kept in
      // death order; one that left the dead set since the range read is skipped
      // and the next of the chunk takes its place.
      for (let i = 0; i < ids.length && jobs.length < limit;) {
        const batch = ids.slice(i, i + limit - jobs.length);
        i += batch.length;
        for (const info of await Promise.all(batch.map(q.get))) {
          if (info?.state !== 'dead') continue;
          jobs.push(info);
          lastShard = shard;
        }
      }
      if (raw.length < 2 * chunk) break;
    }
  }
  const last = jobs[jobs.length - 1];
  return { jobs, next: jobs.length === limit && last ? `${lastShard}:${last.diedAt}:${last.id}` : null };
}
