// Reads a queue shard's due index as lua/lib/due-index.lua lays it out (an
// index ZSET of buckets, each a ZSET of job ids by due time), for tests that
// look at pending jobs directly, and lists every broken invariant of it.
import type { RedisClient } from '../../src/core/redis.js';
import type { ShardKeys } from '../../src/queue/keys.js';
import { DEFAULT_PRIORITY, parseRecord } from '../../src/queue/record.js';
import { masters } from '../../src/core/redis.js';
import { readFileSync } from 'node:fs';
import { allRecords } from './records.js';

/** The library's bucket size limit, read from its source so tests follow it. */
export const BUCKET_MAX = Number(/^local BUCKET_MAX = (\d+)$/m.exec(readFileSync(new URL('../../lua/lib/due-index.lua', import.meta.url), 'utf8'))![1]);

export type DueBucket = { name: string; lower: number; jobs: { id: string; due: number }[] };

const pairs = (flat: string[]) => Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i] as string, Number(flat[2 * i + 1])] as const);

/** A priority lane's index key and bucket prefix (lua/lib/due-index.lua): the default lane (5) is the shard's due keys. */
export function laneKeys(k: ShardKeys, priority: number): { index: string; prefix: string } {
  if (priority === DEFAULT_PRIORITY) return { index: k.due, prefix: k.dueBuckets };
  return { index: `${k.dueBuckets}p${priority}:index`, prefix: `${k.dueBuckets}p${priority}:` };
}
/** The ZSET listing the lanes other than the default that hold jobs. */
export const lanesKey = (k: ShardKeys) => `${k.dueBuckets}lanes`;
const PRIORITIES = Array.from({ length: 10 }, (_, p) => p);

/** The buckets of one lane (default: the default lane's). */
export async function dueBuckets(redis: RedisClient, k: ShardKeys, priority = DEFAULT_PRIORITY): Promise<DueBucket[]> {
  const lane = laneKeys(k, priority);
  const index = pairs(await redis.zrange(lane.index, 0, -1, 'WITHSCORES'));
  return Promise.all(
    index.map(async ([name, lower]) => ({
      name,
      lower,
      jobs: pairs(await redis.zrange(lane.prefix + name, 0, -1, 'WITHSCORES')).map(([id, due]) => ({ id, due })),
    })),
  );
}

/** Pending jobs of the shard's default lane in claim order (all of them when no priority is used). */
export async function pendingJobs(redis: RedisClient, k: ShardKeys): Promise<{ id: string; due: number }[]> {
  return (await dueBuckets(redis, k)).flatMap((b) => b.jobs);
}

/** Pending jobs of every lane: id -> { due, priority }. */
export async function pendingByLane(redis: RedisClient, k: ShardKeys): Promise<Map<string, { due: number; priority: number }>> {
  const out = new Map<string, { due: number; priority: number }>();
  for (const p of PRIORITIES) for (const b of await dueBuckets(redis, k, p)) for (const j of b.jobs) out.set(j.id, { due: j.due, priority: p });
  return out;
}

/** Pending job ids due at or before `at` (ms), in claim order. */
export async function dueIds(redis: RedisClient, k: ShardKeys, at: number): Promise<string[]> {
  return (await pendingJobs(redis, k)).filter((j) => j.due <= at).map((j) => j.id);
}

/** Every way the shard breaks the invariants of lua/lib/due-index.lua (I1-I4), in every priority lane; empty when sound. */
export async function dueIndexProblems(redis: RedisClient, k: ShardKeys): Promise<string[]> {
  const problems: string[] = [];
  const inBucket = new Map<string, number>();
  const laneOf = new Map<string, number>();
  const listed = new Set<string>([k.due, lanesKey(k)]);
  const lanes = new Set((await redis.zrange(lanesKey(k), 0, -1)).map(Number));
  for (const p of PRIORITIES) {
    const buckets = await dueBuckets(redis, k, p);
    const lane = laneKeys(k, p);
    if (p !== DEFAULT_PRIORITY && lanes.has(p) !== buckets.length > 0) problems.push(`I4: lane ${p} listed ${lanes.has(p)}, holds ${buckets.length} buckets`);
    if (buckets.length > 0) listed.add(lane.index);
    buckets.forEach((b, i) => {
      const next = buckets[i + 1];
      listed.add(lane.prefix + b.name);
      if (b.jobs.length === 0) problems.push(`I2: lane ${p} bucket ${b.name} is listed but empty`);
      if (next && next.lower <= b.lower) problems.push(`I1: lane ${p} bounds not increasing at ${b.name} (${b.lower}) -> ${next.name} (${next.lower})`);
      for (const j of b.jobs) {
        if (j.due < b.lower) problems.push(`I1: ${j.id} due ${j.due} before its bucket's bound ${b.lower}`);
        if (next && j.due >= next.lower) problems.push(`I1: ${j.id} due ${j.due} at or after the next bucket's bound ${next.lower}`);
        if (inBucket.has(j.id)) problems.push(`I3: ${j.id} in two buckets`);
        inBucket.set(j.id, j.due);
        laneOf.set(j.id, p);
      }
    });
  }
  for (const key of await keysUnder(redis, k.dueBuckets)) {
    if (!listed.has(key)) problems.push(`I2: bucket key ${key} exists but is not listed`);
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
    else if (parseRecord(text).priority !== laneOf.get(id)) problems.push(`I3: ${id} in lane ${laneOf.get(id)}, its record says ${parseRecord(text).priority}`);
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
