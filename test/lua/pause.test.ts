// Pause and resume at the script level (lua/lib/pause.lua, queue/pause.lua,
// queue/resume.lua, and the claim, schedule, cancel, inspect and stats that
// know parked jobs), against the real Redis: the invariant "a job with a
// record is in exactly one of the due buckets, a parked ZSET, inflight,
// dead", parked jobs found by id, and resume order.
import type { RedisClient } from '../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShardKeys } from '../../src/queue/keys.js';
import { createQueue } from '../../src/queue/producer/queue.js';
import { parseRecord } from '../../src/queue/record.js';
import { runResume } from '../../src/queue/scripts/admin-scripts.js';
import { runAck, runClaim, runNack } from '../../src/queue/scripts/scripts.js';
import { pendingJobs } from '../helpers/due-index.js';
import { allRecords } from '../helpers/records.js';
import { dropQueue, redisClient, redisNowMs, uniqueQueueName } from '../helpers/redis.js';

let redis: RedisClient;
const names: string[] = [];
beforeAll(() => {
  redis = redisClient('pause-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n);
  redis.disconnect();
});

const TYPES = ['a', 'b'] as const;
function queue(tag: string) {
  const name = uniqueQueueName(tag);
  names.push(name);
  return createQueue(redis, { name, shards: 1, types: { a: {}, b: {} }, recordGroups: true });
}

async function parked(k: ShardKeys, type: string): Promise<string[]> {
  return redis.zrange(k.parked + type, 0, -1);
}

/** Every job with a record in exactly one place; every place's job with a record; parked at its record's due time. */
async function placeProblems(k: ShardKeys): Promise<string[]> {
  const problems: string[] = [];
  const records = await allRecords(redis, k);
  const where = new Map<string, string[]>();
  const put = (id: string, place: string) => where.set(id, [...(where.get(id) ?? []), place]);
  for (const j of await pendingJobs(redis, k)) put(j.id, 'due');
  for (const t of TYPES) {
    const flat = await redis.zrange(k.parked + t, 0, -1, 'WITHSCORES');
    for (let i = 0; i < flat.length; i += 2) {
      const id = flat[i] as string;
      put(id, `parked:${t}`);
      const rec = records[id];
      if (rec && (parseRecord(rec).due !== Number(flat[i + 1]) || parseRecord(rec).type !== t)) problems.push(`${id} parked under ${t} at ${flat[i + 1]}, record ${rec}`);
    }
  }
  for (const id of await redis.zrange(k.inflight, 0, -1)) put(id, 'inflight');
  for (const id of await redis.zrange(k.dead, 0, -1)) put(id, 'dead');
  for (const id of Object.keys(records)) if ((where.get(id) ?? []).length !== 1) problems.push(`${id} is in ${JSON.stringify(where.get(id) ?? [])}`);
  for (const id of where.keys()) if (!(id in records)) problems.push(`${id} is in ${JSON.stringify(where.get(id))} without a record`);
  return problems;
}

const claimIds = async (k: ShardKeys, max = 100) => (await runClaim(redis, k, max, 60_000, 100)).jobs.map((j) => j.id);

describe('pause (scripts)', () => {
  it('a paused queue claims nothing, still accepts jobs, and returns expired leases to due', async () => {
    const q = queue('whole');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany([
      { id: 'x1', type: 'a', at: now - 10 },
      { id: 'x2', type: 'b', at: now - 5 },
    ]);
    const leased = await runClaim(redis, k, 1, 1, 100); // x1 under a 1 ms lease
    expect(leased.jobs.map((j) => j.id)).toEqual(['x1']);
    expect(await q.pause()).toEqual({ changed: true });
    expect(await q.pause()).toEqual({ changed: false }); // idempotent
    await q.schedule({ id: 'x3', type: 'a', at: now - 1 });
    await new Promise((r) => setTimeout(r, 5));
    const c = await runClaim(redis, k, 100, 60_000, 100);
    expect(c).toMatchObject({ paused: true, jobs: [], nextDue: null, reclaimed: 1 });
    expect((await q.get('x1'))?.state).toBe('pending'); // the expired lease is back in due
    expect(await placeProblems(k)).toEqual([]);
    expect((await q.stats()).paused).toEqual(['*']);

    expect(await q.resume()).toMatchObject({ changed: true });
    expect(await q.resume()).toMatchObject({ changed: false });
    expect(await claimIds(k)).toEqual(['x1', 'x2', 'x3']);
  });

  it("parks a paused type's due jobs so the other types flow, and finds them by id", async () => {
    const q = queue('type');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany([
      { id: 'a1', type: 'a', at: now - 30 },
      { id: 'a2', type: 'a', at: now - 20 },
      { id: 'b1', type: 'b', at: now - 10 },
      { id: 'a3', type: 'a', at: now - 5 },
      { id: 'a4', type: 'a', at: now + 60_000 },
    ]);
    await q.pause('a');
    const c = await runClaim(redis, k, 100, 60_000, 100);
    expect(c.jobs.map((j) => j.id)).toEqual(['b1']);
    expect(c.parked).toBe(3);
    expect(await parked(k, 'a')).toEqual(['a1', 'a2', 'a3']);
    expect(await placeProblems(k)).toEqual([]);

    // Found by id: inspect, stats, cancel, reschedule (every mode).
    expect(await q.get('a2')).toMatchObject({ state: 'pending', parked: true, dueAt: now - 20 });
    expect(await q.get('a4')).toMatchObject({ state: 'pending', parked: false });
    expect(await q.stats()).toMatchObject({ pending: 4, parked: 3, dueNow: 0, inFlight: 1, paused: ['a'] });
    expect(await q.cancel('a2')).toEqual({ cancelled: true, state: 'pending' });
    expect(await parked(k, 'a')).toEqual(['a1', 'a3']);
    expect((await q.schedule({ id: 'a1', type: 'a', at: now - 40, mode: 'nx' })).status).toBe('exists');
    expect((await q.reschedule('a3', { at: now + 30_000 })).status).toBe('updated');
    expect(await parked(k, 'a')).toEqual(['a1']);
    expect((await q.get('a3'))?.parked).toBe(false);
    expect(await placeProblems(k)).toEqual([]);
    await runAck(redis, k, c.jobs.map((j) => ({ id: j.id, token: parseRecord(j.record).token })));
  });

  it('resume moves parked jobs back in due order, in chunks, and a new pause stops a resume cut short', async () => {
    const q = queue('order');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    const ids = Array.from({ length: 30 }, (_, i) => `j${String(i).padStart(2, '0')}`);
    // Scheduled out of order; due times give the order j00 < j01 < ...
    await q.scheduleMany([...ids].reverse().map((id, i) => ({ id, type: 'a' as const, at: now - 1_000 + (29 - i) })));
    await q.pause('a');
    expect((await runClaim(redis, k, 100, 60_000, 100)).parked).toBe(30);

    // A resume cut short: one chunk of 10 moved, then nothing more moved.
    const first = await runResume(redis, k, 'a', true, 10);
    expect(first).toEqual({ wasPaused: true, moved: 10, left: 20 });
    await q.pause('a'); // the operator pauses again before the rest moves
    expect(await runResume(redis, k, 'a', false, 10)).toEqual({ wasPaused: false, moved: 0, left: 20 });
    expect(await placeProblems(k)).toEqual([]);

    expect(await q.resume('a')).toEqual({ changed: true, moved: 20 });
    expect(await parked(k, 'a')).toEqual([]);
    expect(await claimIds(k)).toEqual(ids);
    expect(await placeProblems(k)).toEqual([]);
  });

  it('a crashed resume is finished by unparkResumed; a retry of a paused type is parked too', async () => {
    const q = queue('repair');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany([
      { id: 'r1', type: 'a', at: now - 10 },
      { id: 'r2', type: 'a', at: now - 5 },
    ]);
    const [r1] = (await runClaim(redis, k, 1, 60_000, 100)).jobs;
    await q.pause('a');
    await runNack(redis, k, 'r1', parseRecord(r1!.record).token, 'retry', 0, 'boom');
    expect((await runClaim(redis, k, 100, 60_000, 100)).parked).toBe(2);
    expect(await parked(k, 'a')).toEqual(['r2', 'r1']); // r1's retry is due after r2

    await runResume(redis, k, 'a', true, 1); // lifted, one moved, then the caller crashed
    expect(await q.unparkResumed()).toBe(1);
    expect(await claimIds(k)).toEqual(['r2', 'r1']);
    expect(await placeProblems(k)).toEqual([]);
  });

  it('refuses an unknown type before writing anything', async () => {
    const q = queue('unknown');
    await expect(q.pause('zzz')).rejects.toMatchObject({ code: 'UNKNOWN_JOB_TYPE' });
    expect(await redis.exists(q.keys[0]!.paused)).toBe(0);
  });
});
