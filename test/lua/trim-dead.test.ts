// The dead set is trimmed (review 2026-11-23, F11): trim-dead.lua removes the
// dead jobs older than the maximum age, then the oldest beyond the maximum
// count, at most `limit` a call, each with its record and last error, and
// touches nothing else (pending and in-flight jobs, a job redriven out of the
// dead set); queue.trimDead() applies the queue's retention to every shard.
// Deaths are real (claim, then nack to the dead set); their times of death are
// then set back (ZADD XX on the dead set) to stand for jobs that died long ago.
import type { RedisClient } from '../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ShardKeys, shardOf } from '../../src/queue/keys.js';
import { type DeadRetention, type Queue, createQueue } from '../../src/queue/producer/queue.js';
import { runTrimDead } from '../../src/queue/scripts/admin-scripts.js';
import { runClaim, runNack } from '../../src/queue/scripts/scripts.js';
import { pendingJobs } from '../helpers/due-index.js';
import { dropQueue, redisClient, redisNowMs, uniqueQueueName } from '../helpers/redis.js';
import { allRecords } from '../helpers/records.js';

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const WEEK = 7 * DAY;

let redis: RedisClient;
const names: string[] = [];
beforeAll(() => {
  redis = redisClient('trim-dead-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n);
  redis.disconnect();
});

function queue(shards = 1, deadRetention?: DeadRetention): Queue {
  const name = uniqueQueueName('trim');
  names.push(name);
  return createQueue(redis, { name, shards, types: { t: {} }, ...(deadRetention && { deadRetention }) });
}

/**
 * Fills shard 0 of `q`: the dead jobs of `ages` (id -> ms since death, on the
 * Redis clock), and beside them a job in flight ("f"), one pending in an hour
 * ("p") and one redriven out of the dead set after dying long ago ("r").
 */
async function fill(q: Queue, ages: Record<string, number>): Promise<void> {
  const k = q.keys[0]!;
  const dying = [...Object.keys(ages), 'r'];
  await q.scheduleMany([...dying, 'f'].map((id) => ({ id, type: 't', delayMs: 0, payload: { id } })));
  const claimed = await runClaim(redis, k, dying.length + 1, 60 * MINUTE, 100);
  expect(claimed.jobs).toHaveLength(dying.length + 1);
  for (const j of claimed.jobs.filter((c) => c.id !== 'f')) {
    const r = await runNack(redis, k, j.id, Number(j.record.split(',')[0]), 'dead', 0, `failed: ${j.id}`);
    expect(r.code).toBe(2);
  }
  const now = await redisNowMs(redis);
  for (const [id, age] of Object.entries({ ...ages, r: 30 * DAY })) await redis.zadd(k.dead, 'XX', now - age, id);
  expect(await q.redrive('r')).toBe(true); // pending again; its last error stays
  await q.schedule({ id: 'p', type: 't', delayMs: 60 * MINUTE });
}

type ShardState = { dead: string[]; jobs: Record<string, string>; errors: Record<string, string>; inflight: string[]; pending: string[]; seq: string | null };

async function state(k: ShardKeys): Promise<ShardState> {
  return {
    dead: await redis.zrange(k.dead, 0, -1, 'WITHSCORES'),
    jobs: await allRecords(redis, k),
    errors: await redis.hgetall(k.errors),
    inflight: await redis.zrange(k.inflight, 0, -1, 'WITHSCORES'),
    pending: (await pendingJobs(redis, k)).map((j) => `${j.id}@${j.due}`),
    seq: await redis.get(k.seq),
  };
}

/** `before` with the dead jobs `ids` gone: their dead-set entries, records and errors, and nothing else. */
function without(before: ShardState, ids: string[]): ShardState {
  const gone = new Set(ids);
  const dead: string[] = [];
  for (let i = 0; i < before.dead.length; i += 2) if (!gone.has(before.dead[i]!)) dead.push(before.dead[i]!, before.dead[i + 1]!);
  const drop = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).filter(([id]) => !gone.has(id)));
  return { ...before, dead, jobs: drop(before.jobs), errors: drop(before.errors) };
}

const deadIds = async (k: ShardKeys) => redis.zrange(k.dead, 0, -1);

describe('trim-dead.lua', () => {
  it('removes the dead jobs past the maximum age with their records and errors, and touches nothing else', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await fill(q, { old1: 10 * DAY, old2: WEEK + MINUTE, new1: WEEK - MINUTE, new2: MINUTE });
    const before = await state(k);
    expect(before.errors).toMatchObject({ old1: 'failed: old1', r: 'failed: r' });

    expect(await runTrimDead(redis, k, WEEK, 100, 100)).toBe(2);
    expect(await state(k)).toEqual(without(before, ['old1', 'old2']));
    expect(await q.get('old1')).toBeNull();
    expect(await q.get('new1')).toMatchObject({ state: 'dead', lastError: 'failed: new1' });
    expect(await q.get('f')).toMatchObject({ state: 'in_flight' });
    expect(await q.get('p')).toMatchObject({ state: 'pending' });
    expect(await q.get('r')).toMatchObject({ state: 'pending', lastError: 'failed: r' });
    expect(await runTrimDead(redis, k, WEEK, 100, 100)).toBe(0); // nothing more is past the age
  });

  it('removes the oldest dead jobs beyond the maximum count', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await fill(q, { a: 5 * MINUTE, b: 4 * MINUTE, c: 3 * MINUTE, d: 2 * MINUTE, e: MINUTE });
    const before = await state(k);
    expect(await runTrimDead(redis, k, WEEK, 2, 100)).toBe(3);
    expect(await state(k)).toEqual(without(before, ['a', 'b', 'c']));
    expect(await runTrimDead(redis, k, WEEK, 2, 100)).toBe(0);
  });

  it('removes at most `limit` a call, the oldest first (past the age)', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await fill(q, { a: 14 * DAY, b: 13 * DAY, c: 12 * DAY, d: 11 * DAY, e: 10 * DAY });
    const before = await state(k);
    expect(await runTrimDead(redis, k, WEEK, 100, 2)).toBe(2);
    expect(await deadIds(k)).toEqual(['c', 'd', 'e']);
    expect(await runTrimDead(redis, k, WEEK, 100, 2)).toBe(2);
    expect(await deadIds(k)).toEqual(['e']);
    expect(await runTrimDead(redis, k, WEEK, 100, 2)).toBe(1);
    expect(await runTrimDead(redis, k, WEEK, 100, 2)).toBe(0);
    expect(await state(k)).toEqual(without(before, ['a', 'b', 'c', 'd', 'e']));
  });

  it('removes at most `limit` a call beyond the count too', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await fill(q, { a: 5 * MINUTE, b: 4 * MINUTE, c: 3 * MINUTE, d: 2 * MINUTE, e: MINUTE });
    const before = await state(k);
    expect(await runTrimDead(redis, k, WEEK, 1, 2)).toBe(2);
    expect(await deadIds(k)).toEqual(['c', 'd', 'e']);
    expect(await runTrimDead(redis, k, WEEK, 1, 2)).toBe(2);
    expect(await runTrimDead(redis, k, WEEK, 1, 2)).toBe(0);
    expect(await state(k)).toEqual(without(before, ['a', 'b', 'c', 'd']));
  });

  it('counts the jobs past the age and those beyond the count against one limit', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await fill(q, { old1: 10 * DAY, old2: 9 * DAY, a: 4 * MINUTE, b: 3 * MINUTE, c: 2 * MINUTE, d: MINUTE });
    const before = await state(k);
    // Two past the age, then one of the three beyond the count: the limit is used up.
    expect(await runTrimDead(redis, k, WEEK, 1, 3)).toBe(3);
    expect(await deadIds(k)).toEqual(['b', 'c', 'd']);
    expect(await runTrimDead(redis, k, WEEK, 1, 3)).toBe(2); // the rest beyond the count
    expect(await runTrimDead(redis, k, WEEK, 1, 3)).toBe(0);
    expect(await state(k)).toEqual(without(before, ['old1', 'old2', 'a', 'b', 'c']));
  });
});

describe('queue.trimDead', () => {
  it("applies the queue's retention to every shard", async () => {
    const shards = 3;
    const q = queue(shards, { maxAgeMs: WEEK, maxCount: 2 });
    // Four dead jobs a shard: one past the age, three recent, one too many.
    const ids = Array.from({ length: 200 }, (_, i) => `job-${i}`);
    const perShard = Array.from({ length: shards }, (_, s) => ids.filter((id) => shardOf(id, shards) === s).slice(0, 4));
    perShard.forEach((list) => expect(list).toHaveLength(4));
    await q.scheduleMany(perShard.flat().map((id) => ({ id, type: 't', delayMs: 0 })));
    const now = await redisNowMs(redis);
    for (const [s, list] of perShard.entries()) {
      const k = q.keys[s]!;
      const claimed = await runClaim(redis, k, 10, 60 * MINUTE, 100);
      for (const j of claimed.jobs) await runNack(redis, k, j.id, Number(j.record.split(',')[0]), 'dead', 0, 'failed');
      // All past the ten minutes a dead job stays whatever the count.
      const ages = [10 * DAY, 30 * MINUTE, 20 * MINUTE, 15 * MINUTE];
      for (const [i, id] of list.entries()) await redis.zadd(k.dead, 'XX', now - ages[i]!, id);
    }

    expect(await q.trimDead()).toBe(2 * shards);
    for (const [s, list] of perShard.entries()) {
      const k = q.keys[s]!;
      expect(await deadIds(k)).toEqual(list.slice(2));
      expect(Object.keys(await allRecords(redis, k)).sort()).toEqual(list.slice(2).sort());
      expect(Object.keys(await redis.hgetall(k.errors)).sort()).toEqual(list.slice(2).sort());
    }
    expect(await q.trimDead()).toBe(0);
  });

  it('keeps calling a shard while each call removes a full batch', async () => {
    const q = queue(1, { maxAgeMs: WEEK, maxCount: 10 });
    const k = q.keys[0]!;
    const ids = Array.from({ length: 2_050 }, (_, i) => `job-${String(i).padStart(4, '0')}`);
    await q.scheduleMany(ids.map((id) => ({ id, type: 't', delayMs: 0 })));
    const claimed = await runClaim(redis, k, ids.length, 60 * MINUTE, 100);
    expect(claimed.jobs).toHaveLength(ids.length);
    await Promise.all(claimed.jobs.map((j) => runNack(redis, k, j.id, Number(j.record.split(',')[0]), 'dead', 0, 'failed')));
    // Died an hour ago or more (in their order), past the count rule's minimum age.
    const now = await redisNowMs(redis);
    const order = await redis.zrange(k.dead, 0, -1);
    await redis.zadd(k.dead, 'XX', ...order.flatMap((id, i) => [now - 60 * MINUTE - (order.length - i), id]));
    const survivors = (await redis.zrange(k.dead, -10, -1)).sort(); // the ten latest deaths

    expect(await q.trimDead()).toBe(ids.length - 10); // more than one call's 1 000
    expect((await deadIds(k)).sort()).toEqual(survivors);
    expect(Object.keys(await allRecords(redis, k)).sort()).toEqual(survivors);
    expect(await redis.hlen(k.errors)).toBe(10);
  });
});

describe('the count rule and recent deaths', () => {
  // A dead delivery job must live long enough for the notifications relay to
  // see it dead (it marks the row FAILED); trimmed at once, the relay would
  // find no job and send the notification again (review of 2026-11-23).
  it('keeps jobs dead for less than ten minutes even over the count', async () => {
    const q = queue(1, { maxAgeMs: WEEK, maxCount: 1 });
    const k = q.keys[0]!;
    await fill(q, { a: 20 * MINUTE, b: 5 * MINUTE, c: MINUTE });
    expect(await q.trimDead()).toBe(1); // only a: b and c are over the count, but recent
    expect(await deadIds(k)).toEqual(['b', 'c']);
  });
});

describe('trim-dead.lua with a large limit', () => {
  it('removes more dead jobs in one call than Lua unpacks into one command', async () => {
    const q = queue();
    const k = q.keys[0]!;
    const n = 9_000;
    await q.scheduleMany(Array.from({ length: n }, (_, i) => ({ id: `job-${i}`, type: 't', delayMs: 0 })));
    const claimed = await runClaim(redis, k, n, 60 * MINUTE, 100);
    await Promise.all(claimed.jobs.map((j) => runNack(redis, k, j.id, Number(j.record.split(',')[0]), 'dead', 0, 'failed')));
    expect(await runTrimDead(redis, k, WEEK, 0, n)).toBe(n);
    expect(await q.stats()).toMatchObject({ pending: 0, inFlight: 0, dead: 0 });
    expect(await allRecords(redis, k)).toEqual({});
    expect(await redis.hlen(k.errors)).toBe(0);
  });
});
