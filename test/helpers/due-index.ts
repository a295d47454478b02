// Reads a queue shard's due index as lua/lib/due-index.lua lays it out (an
// index ZSET of buckets, each a ZSET of job ids by due time), for tests that
// look at pending jobs directly, and lists every broken invariant of it.
import type { RedisClient } from '../../src/core/redis.js';
import type { ShardKeys } from '../../src/queue/keys.js';
import { parseRecord } from '../../src/queue/record.js';
import { masters } from '../../src/core/redis.js';
import { readFileSync } from 'node:fs';
import { allRecords } from './records.js';

/** The library's bucket size limit, read from its source so tests follow it. */
export const BUCKET_MAX = Number(/^local BUCKET_MAX = (\d+)$/m.exec(readFileSync(new URL('../../lua/lib/due-index.lua', import.meta.url), 'utf8'))![1]);

export type DueBucket = { name: string; lower: number; jobs: { id: string; due: number }[] };

const pairs = (flat: string[]) => Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i] as string, Number(flat[2 * i + 1])] as const);

export async function dueBuckets(redis: RedisClient, k: ShardKeys): Promise<DueBucket[]> {
  const index = pairs(await redis.zrange(k.due, 0, -1, 'WITHSCORES'));
  return Promise.all(
    index.map(async ([name, lower]) => ({
      name,
      lower,
      jobs: pairs(await redis.zrange(k.dueBuckets + name, 0, -1, 'WITHSCORES')).map(([id, due]) => ({ id, due })),
    })),
  );
}

/** Pending jobs of the shard in claim order. */
export async function pendingJobs(redis: RedisClient, k: ShardKeys): Promise<{ id: string; due: number }[]> {
  return (await dueBuckets(redis, k)).flatMap((b) => b.jobs);
}

/** Pending job ids due at or before `at` (ms), in claim order. */
export async function dueIds(redis: RedisClient, k: ShardKeys, at: number): Promise<string[]> {
  return (await pendingJobs(redis, k)).filter((j) => j.due <= at).map((j) => j.id);
}

/** Every way the shard breaks the invariants of lua/lib/due-index.lua (I1-I3); empty when sound. */
export async function dueIndexProblems(redis: RedisClient, k: ShardKeys): Promise<string[]> {
  const problems: string[] = [];
  const buckets = await dueBuckets(redis, k);
  const inBucket = new Map<string, number>();
  buckets.forEach((b, i) => {
    const next = buckets[i + 1];
    if (b.jobs.length === 0) problems.push(`I2: bucket ${b.name} is listed but empty`);
    if (next && next.lower <= b.lower) problems.push(`I1: bounds not increasing at ${b.name} (${b.lower}) -> ${next.name} (${next.lower})`);
    for (const j of b.jobs) {
      if (j.due < b.lower) problems.push(`I1: ${j.id} due ${j.due} before its bucket's bound ${b.lower}`);
      if (next && j.due >= next.lower) problems.push(`I1: ${j.id} due ${j.due} at or after the next bucket's bound ${next.lower}`);
      if (inBucket.has(j.id)) problems.push(`I3: ${j.id} in two buckets`);
      inBucket.set(j.id, j.due);
    }
  });
  const listed = new Set(buckets.map((b) => k.dueBuckets + b.name));
  for (const key of await keysUnder(redis, k.dueBuckets)) {
    if (key !== k.due && !listed.has(key)) problems.push(`I2: bucket key ${key} exists but is not listed`);
  }
  const records = await allRecords(redis, k);
  const [inflight, dead] = await Promise.all([redis.zrange(k.inflight, 0, -1), redis.zrange(k.dead, 0, -1)]);
  const elsewhere = new Set([...inflight, ...dead]);
  for (const [id, text] of Object.entries(records)) {
    if (elsewhere.has(id)) {
      if (inBucket.has(id)) problems.push(`I3: ${id} is pending and in flight or dead`);
      continue;
    }
    const due = inBucket.get(id);
    if (due === undefined) problems.push(`I3: ${id} has a record but is in no set`);
    else if (parseRecord(text).due !== due) problems.push(`I3: ${id} filed at ${due}, its record says ${parseRecord(text).due}`);
  }
  for (const id of inBucket.keys()) if (!(id in records)) problems.push(`${id} is pending without a record`);
  return problems;
}

async function keysUnder(redis: RedisClient, prefix: string): Promise<string[]> {
  const found: string[] = [];
  for (const node of masters(redis)) {
    for await (const keys of node.scanStream({ match: `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`, count: 1000 }) as AsyncIterable<string[]>) {
      found.push(...keys);
    }
  }
  return found;
}
