// Paging through a queue's dead jobs across shards, oldest death first, with
// an opaque keyset cursor ("shard:diedAt:id" of the last job returned), so a
// page never repeats or skips a job while others die or are redriven.
import { QueueErrorCode, QueueInputError } from '../errors.js';
import { type ShardKeys, shardOf } from '../keys.js';
import type { JobInfo } from '../types.js';
import type { RedisClient } from '../redis-client.js';
import { invalidOptions } from '../errors.js';

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
        for (const info of await Promise.all(batch.map(q.get))) if (info?.state === 'dead') jobs.push(info);
      }
      if (raw.length < 2 * chunk) break;
    }
  }
  const last = jobs[jobs.length - 1];
  const lastShard = last ? shardOf(last.id, shards) : 0;
  return { jobs, next: jobs.length === limit && last ? `${lastShard}:${last.diedAt}:${last.id}` : null };
}
