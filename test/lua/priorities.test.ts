// Job priorities at the script level (lua/lib/due-index.lua's lanes,
// lua/lib/record.lua's priority field, lua/queue/claim.lua's order), against
// the real Redis: claim order by priority then due time, the aging bound,
// nothing before its due time, and every script that moves a job by id
// (schedule, reschedule, cancel, nack, release, lease expiry, pause and resume,
// redrive) finding it in its lane and leaving it in its lane.
import type { RedisClient } from '../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueErrorCode } from '../../src/queue/errors.js';
import type { ShardKeys } from '../../src/queue/keys.js';
import { createQueue, type ScheduleInput } from '../../src/queue/producer/queue.js';
import { parseRecord } from '../../src/queue/record.js';
import { runResume } from '../../src/queue/scripts/admin-scripts.js';
import { NackCode, runAck, runClaim, runNack, runRelease } from '../../src/queue/scripts/scripts.js';
import { dueIndexProblems, lanesKey, pendingByLane } from '../helpers/due-index.js';
import { allRecords } from '../helpers/records.js';
import { dropQueue, redisClient, redisNowMs, sleep, uniqueQueueName } from '../helpers/redis.js';

let redis: RedisClient;
const names: string[] = [];
beforeAll(() => {
  redis = redisClient('priorities-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n);
  redis.disconnect();
});

function queue(tag: string, recordGroups = true) {
  const name = uniqueQueueName(tag);
  names.push(name);
  return createQueue(redis, { name, shards: 1, types: { a: {}, b: {} }, recordGroups });
}

const HOUR = 3_600_000;
/** Claims up to max jobs; aging null: strict priority. */
const claimIds = async (k: ShardKeys, max = 100, agingMs: number | null = HOUR) =>
  (await runClaim(redis, k, max, 60_000, 100, null, agingMs)).jobs.map((j) => j.id);

async function sound(k: ShardKeys) {
  expect(await dueIndexProblems(redis, k)).toEqual([]);
}

describe('priorities (scripts)', () => {
  it('claims due jobs by priority, then by due time; nothing before its time', async () => {
    const q = queue('order');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    const jobs: ScheduleInput[] = [
      { id: 'p5-old', type: 'a', at: now - 900 },
      { id: 'p1', type: 'a', at: now - 1_000, priority: 1 },
      { id: 'p9-late', type: 'a', at: now - 100, priority: 9 },
      { id: 'p9-early', type: 'a', at: now - 200, priority: 9 },
      { id: 'p7', type: 'b', at: now - 50, priority: 7 },
      { id: 'p5-new', type: 'b', at: now - 10, priority: 5 },
      { id: 'p0', type: 'a', at: now - 2_000, priority: 0 },
      { id: 'p9-future', type: 'a', at: now + HOUR, priority: 9 },
    ];
    await q.scheduleMany(jobs);
    await sound(k);
    expect(await redis.zrange(lanesKey(k), 0, -1)).toEqual(['0', '1', '7', '9']);
    // Three at a time: each claim takes the best of what is left.
    expect(await claimIds(k, 3)).toEqual(['p9-early', 'p9-late', 'p7']);
    expect(await claimIds(k, 3)).toEqual(['p5-old', 'p5-new', 'p1']);
    expect(await claimIds(k, 3)).toEqual(['p0']);
    expect(await claimIds(k, 3)).toEqual([]); // p9-future is not due
    const c = await runClaim(redis, k, 3, 60_000, 100, null, HOUR);
    expect(c.nextDue).toBe(now + HOUR); // the head over every lane
    await sound(k);
    expect(await redis.zrange(lanesKey(k), 0, -1)).toEqual(['9']);
  });

  it('gives jobs overdue past the aging bound half of each claim, oldest first, whatever their priority', async () => {
    const q = queue('aging');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany([
      { id: 'high-fresh', type: 'a', at: now - 100, priority: 9 },
      { id: 'low-aged', type: 'a', at: now - 5_000, priority: 0 },
      { id: 'mid-aged', type: 'a', at: now - 4_000 },
      { id: 'high-aged', type: 'a', at: now - 6_000, priority: 8 },
      { id: 'low-fresh', type: 'a', at: now - 200, priority: 1 },
    ]);
    // Bound 1 s: three are past it. Half of a claim of 2 is the oldest of
    // them, the other half goes by priority; a claim of 10 takes the other
    // two aged ones (oldest first), then the rest by priority.
    expect(await claimIds(k, 2, 1_000)).toEqual(['high-aged', 'high-fresh']);
    expect(await claimIds(k, 10, 1_000)).toEqual(['low-aged', 'mid-aged', 'low-fresh']);
    await sound(k);
  });

  it('keeps priority order under a backlog older than the aging bound', async () => {
    const q = queue('backlog');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany(Array.from({ length: 200 }, (_, i) => ({ id: `old-${i}`, type: 'a', at: now - 20_000 + i })));
    await q.scheduleMany([{ id: 'urgent', type: 'a', at: now - 1_000, priority: 9 }]);
    // Not past the bound itself, the urgent job still takes the priority half of the next claim.
    const first = await claimIds(k, 10, 10_000);
    expect(first).toContain('urgent');
    expect(first.filter((id) => id.startsWith('old-'))).toEqual(['old-0', 'old-1', 'old-2', 'old-3', 'old-4', 'old-5', 'old-6', 'old-7', 'old-8']);
    await sound(k);
  });

  it('without an aging bound, strict priority among due jobs', async () => {
    const q = queue('strict');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany([
      { id: 'low-old', type: 'a', at: now - 60_000, priority: 0 },
      { id: 'high', type: 'a', at: now - 1, priority: 9 },
    ]);
    expect(await claimIds(k, 1, null)).toEqual(['high']);
    expect(await claimIds(k, 1, null)).toEqual(['low-old']);
  });

  it('keeps a default job record as it was and writes p<k> for the others', async () => {
    for (const groups of [true, false]) {
      const q = queue(`record-${groups}`, groups);
      const k = q.keys[0]!;
      const now = await redisNowMs(redis);
      await q.scheduleMany([
        { id: 'd', type: 'a', at: now + HOUR, payload: { x: 1 } },
        { id: 'd5', type: 'a', at: now + HOUR, payload: { x: 1 }, priority: 5 },
        { id: 'p3', type: 'a', at: now + HOUR, payload: { x: 1 }, priority: 3, maxAttempts: 4 },
        { id: 'p9', type: 'b', at: now + HOUR, priority: 9 },
      ]);
      const recs = await allRecords(redis, k);
      expect(recs.d).toBe(`0,0,${now + HOUR},,a,{"x":1}`);
      expect(recs.d5).toBe(recs.d);
      expect(recs.p3).toBe(`0,0,${now + HOUR},4p3,a,{"x":1}`);
      expect(recs.p9).toBe(`0,0,${now + HOUR},p9,b,null`);
      expect(parseRecord(recs.p3!)).toMatchObject({ maxAttempts: 4, priority: 3, type: 'a' });
      expect(parseRecord(recs.d!)).toMatchObject({ maxAttempts: undefined, priority: 5 });
      expect((await q.get('p9'))?.priority).toBe(9);
      expect((await q.get('d'))?.priority).toBe(5);
      await sound(k);
    }
  });

  it('refuses a priority outside 0..9, or not an integer, writing nothing', async () => {
    const q = queue('invalid');
    for (const priority of [-1, 10, 1.5, Number.NaN, '7' as unknown as number]) {
      await expect(q.scheduleMany([{ id: 'ok', type: 'a', delayMs: 0 }, { id: 'bad', type: 'a', delayMs: 0, priority }])).rejects.toMatchObject({
        code: QueueErrorCode.INVALID_PRIORITY,
      });
    }
    expect(await q.get('ok')).toBeNull();
  });

  it('cancels and reschedules a prioritized job in its lane; an upsert with another priority moves its lane', async () => {
    const q = queue('moves');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany([
      { id: 'x', type: 'a', at: now + HOUR, priority: 2 },
      { id: 'y', type: 'a', at: now + HOUR, priority: 2 },
    ]);
    expect(await q.cancel('x')).toEqual({ cancelled: true, state: 'pending' });
    expect(await q.reschedule('y', { at: now + 2 * HOUR })).toMatchObject({ status: 'updated' });
    expect(await pendingByLane(redis, k)).toEqual(new Map([['y', { due: now + 2 * HOUR, priority: 2 }]]));
    await sound(k);
    await q.schedule({ id: 'y', type: 'a', at: now + HOUR, priority: 8 });
    expect(await pendingByLane(redis, k)).toEqual(new Map([['y', { due: now + HOUR, priority: 8 }]]));
    expect(await redis.zrange(lanesKey(k), 0, -1)).toEqual(['8']);
    await q.schedule({ id: 'y', type: 'a', at: now + HOUR });
    expect(await pendingByLane(redis, k)).toEqual(new Map([['y', { due: now + HOUR, priority: 5 }]]));
    expect(await redis.exists(lanesKey(k))).toBe(0); // only the default lane is left
    expect(await q.cancel('y')).toEqual({ cancelled: true, state: 'pending' });
    await sound(k);
    // Nothing of the lanes is left behind.
    expect(await redis.keys(`${k.dueBuckets}*`)).toEqual([]);
  });

  it('puts a job back in its lane after a nack, a release and an expired lease', async () => {
    const q = queue('back');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany([
      { id: 'n', type: 'a', at: now - 10, priority: 9 },
      { id: 'r', type: 'a', at: now - 10, priority: 1 },
      { id: 'e', type: 'a', at: now - 10, priority: 7 },
    ]);
    const c = await runClaim(redis, k, 2, 60_000, 100, null, HOUR);
    expect(c.jobs.map((j) => j.id)).toEqual(['n', 'e']);
    const [n, e] = c.jobs.map((j) => parseRecord(j.record));
    expect(n?.priority).toBe(9);
    expect((await runNack(redis, k, 'n', n!.token, 'retry', 0, 'boom')).code).toBe(NackCode.RETRY);
    const r = await runClaim(redis, k, 1, 60_000, 100, null, HOUR); // n again (9 beats 1)
    expect(r.jobs.map((j) => j.id)).toEqual(['n']);
    expect(await runRelease(redis, k, [{ id: 'n', token: parseRecord(r.jobs[0]!.record).token }])).toBe(1);
    await sound(k);
    expect((await pendingByLane(redis, k)).get('n')?.priority).toBe(9);
    // e under a 1 ms lease: back in lane 7 by the next claim.
    await runAck(redis, k, [{ id: 'e', token: e!.token }]);
    await q.schedule({ id: 'e', type: 'a', at: now - 10, priority: 7 });
    expect(await claimIds(k, 1)).toEqual(['n']);
    const short = await runClaim(redis, k, 1, 1, 100, null, HOUR);
    expect(short.jobs.map((j) => j.id)).toEqual(['e']);
    await sleep(5);
    const again = await runClaim(redis, k, 0, 60_000, 100, null, HOUR);
    expect(again.reclaimed).toBe(1);
    expect((await pendingByLane(redis, k)).get('e')).toEqual({ due: now - 10, priority: 7 });
    await sound(k);
  });

  it('parks a paused type of every priority and resumes each into its lane, in priority order', async () => {
    const q = queue('pause');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany([
      { id: 'a-low', type: 'a', at: now - 30, priority: 2 },
      { id: 'a-high', type: 'a', at: now - 20, priority: 8 },
      { id: 'a-mid', type: 'a', at: now - 40 },
      { id: 'b-mid', type: 'b', at: now - 10 },
    ]);
    await q.pause('a');
    expect(await claimIds(k)).toEqual(['b-mid']);
    expect((await redis.zrange(k.parked + 'a', 0, -1)).sort()).toEqual(['a-high', 'a-low', 'a-mid']);
    expect(await redis.exists(lanesKey(k))).toBe(0);
    // Parked jobs are found by id in every mode, whatever their lane.
    expect((await q.get('a-high'))?.parked).toBe(true);
    expect(await q.cancel('a-low')).toEqual({ cancelled: true, state: 'pending' });
    await q.schedule({ id: 'a-low', type: 'a', at: now - 30, priority: 2 });
    await runResume(redis, k, 'a', true, 100);
    await sound(k);
    expect(await claimIds(k)).toEqual(['a-high', 'a-mid', 'a-low']);
  });

  it('redrives a dead prioritized job into its lane; stats count every lane', async () => {
    const q = queue('redrive');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    await q.scheduleMany([
      { id: 'd', type: 'a', at: now - 10, priority: 6 },
      { id: 'later', type: 'a', at: now + HOUR, priority: 0 },
      { id: 'plain', type: 'a', at: now - 5 },
    ]);
    const c = await runClaim(redis, k, 1, 60_000, 100, null, HOUR);
    expect(c.jobs.map((j) => j.id)).toEqual(['d']);
    await runNack(redis, k, 'd', parseRecord(c.jobs[0]!.record).token, 'dead', 0, 'gave up');
    expect(await q.redrive('d')).toBe(true);
    expect((await pendingByLane(redis, k)).get('d')?.priority).toBe(6);
    const s = await q.stats();
    expect(s).toMatchObject({ pending: 3, dueNow: 2, nextDueAt: now - 5 });
    expect(s.nextDueAt).not.toBeNull();
    await sound(k);
  });

  it('stays sound through random schedules, moves, cancels and claims over every lane', async () => {
    const q = queue('random');
    const k = q.keys[0]!;
    const now = await redisNowMs(redis);
    let seed = 20261129;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return seed % n;
    };
    const ids = Array.from({ length: 300 }, (_, i) => `j${i}`);
    for (let step = 0; step < 120; step++) {
      const op = rnd(10);
      if (op < 6) {
        const jobs: ScheduleInput[] = Array.from({ length: 1 + rnd(80) }, () => ({
          id: ids[rnd(ids.length)]!,
          type: 'a',
          at: now + (rnd(3) === 0 ? -rnd(10_000) : rnd(HOUR)),
          ...(rnd(3) > 0 && { priority: rnd(10) }),
        }));
        await q.scheduleMany(jobs);
      } else if (op < 8) {
        await q.cancel(ids[rnd(ids.length)]!);
      } else {
        const got = await runClaim(redis, k, 1 + rnd(30), 60_000, 100, null, rnd(2) === 0 ? 2_000 : null);
        const prios = got.jobs.map((j) => parseRecord(j.record));
        for (const j of got.jobs) expect(j.dueAt).toBeLessThanOrEqual(got.now);
        if (got.jobs.length > 0) await runAck(redis, k, prios.map((p, i) => ({ id: got.jobs[i]!.id, token: p.token })));
      }
      if (step % 20 === 19) await sound(k);
    }
    await sound(k);
  });
});
