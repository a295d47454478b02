// The queue limiter's scripts against a real Redis: admit.lua judges a run of
// jobs against the queue's, type's and endpoint's buckets together (a job one
// bucket refuses takes nothing from the others), and slow-down.lua holds an
// endpoint and halves its rate once per hold, at most to its bound.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../src/core/redis.js';
import { queueLimitKeys } from '../../src/queue/keys.js';
import { bucketOf } from '../../src/queue/limits/limit-rules.js';
import { runAdmit, runSlowDown } from '../../src/queue/scripts/limit-scripts.js';
import { dropPrefix, redisClient, uniqueQueueName } from '../helpers/redis.js';

let redis: RedisClient;
const prefixes: string[] = [];
const keysOf = () => {
  const p = uniqueQueueName('ql').replace(/^t-/, 'tql');
  prefixes.push(p);
  return queueLimitKeys(p);
};
const RECOVERY_MS = 60_000;

beforeAll(() => {
  redis = redisClient('queue-limits-test');
});
afterAll(async () => {
  for (const p of prefixes) await dropPrefix(redis, p);
  redis.disconnect();
});

const OPTS = { recoveryMs: RECOVERY_MS, horizonMs: 60_000, slowedIntervalUs: 100_000 };
const jobs = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `q:${tag}${i}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const admittedOf = (waits: number[]) => waits.filter((w) => w === 0).length;

describe('admit.lua', () => {
  it('admits the burst, then books the rest one interval apart', async () => {
    const keys = keysOf();
    const waits = await runAdmit(redis, keys, jobs(10, 'a'), { queue: bucketOf('q', { count: 50, intervalMs: 1_000 }), endpointName: null }, OPTS);
    expect(waits.slice(0, 5)).toEqual([0, 0, 0, 0, 0]); // a tenth of 50 at once
    expect(waits[5]).toBeGreaterThan(0);
    expect(waits[5]).toBeLessThanOrEqual(20);
    for (let i = 6; i < 10; i++) expect((waits[i] as number) - (waits[i - 1] as number)).toBeGreaterThanOrEqual(19);
  });

  it('turns booked for refused jobs are not handed out again: fresh jobs come after them', async () => {
    const keys = keysOf();
    const tenPerSecond = { queue: bucketOf('q', { count: 10, intervalMs: 1_000 }), endpointName: null };
    const first = await runAdmit(redis, keys, jobs(10, 'a'), tenPerSecond, OPTS);
    expect(admittedOf(first)).toBe(1);
    const second = await runAdmit(redis, keys, jobs(5, 'b'), tenPerSecond, OPTS);
    expect(admittedOf(second)).toBe(0);
    expect(second[0]).toBeGreaterThanOrEqual((first[9] as number) + 50);
    // Asked again, a booked job is told its own turn, not a new one at the back.
    const again = await runAdmit(redis, keys, ['q:a9'], tenPerSecond, OPTS);
    expect(again[0]).toBeLessThanOrEqual(first[9] as number);
  });

  it('a job back late for its turn is admitted on its booking, and the next booked turn does not move', async () => {
    const keys = keysOf();
    const fivePerSecond = { queue: bucketOf('q', { count: 5, intervalMs: 1_000 }), endpointName: null }; // 200 ms apart, burst 1
    const first = await runAdmit(redis, keys, jobs(3, 'a'), fivePerSecond, OPTS);
    expect(first[0]).toBe(0);
    await sleep((first[1] as number) + 60);
    // A fresh job arriving at a1's turn, before a1 is back, does not take it.
    const fresh = await runAdmit(redis, keys, ['q:f'], fivePerSecond, OPTS);
    expect(fresh[0]).toBeGreaterThan(0);
    // a1 back 60 ms late: admitted without being judged; a2's turn is still its own.
    expect(await runAdmit(redis, keys, ['q:a1'], fivePerSecond, OPTS)).toEqual([0]);
    await sleep(Math.max(0, (first[2] as number) - (first[1] as number) - 60));
    expect(await runAdmit(redis, keys, ['q:a2'], fivePerSecond, OPTS)).toEqual([0]);
    expect(await redis.zcard(keys.bookings)).toBe(1); // only f's
  });

  it('a turn past the horizon is not booked, and a rule changed meanwhile is not held to the old one', async () => {
    const keys = keysOf();
    const daily = { queue: bucketOf('q', { count: 1, intervalMs: 24 * 3_600_000 }), endpointName: null };
    const waits = await runAdmit(redis, keys, jobs(1_000, 'a'), daily, OPTS);
    expect(waits[0]).toBe(0);
    // 999 turns days away: each comes back at the horizon to be judged again, nothing booked.
    expect(new Set(waits.slice(1))).toEqual(new Set([60_000]));
    expect(await redis.zcard(keys.bookings)).toBe(0);
    const lifted = await runAdmit(redis, keys, jobs(10, 'a'), { queue: bucketOf('q', { count: 1_000, intervalMs: 1_000 }), endpointName: null }, OPTS);
    expect(admittedOf(lifted)).toBe(10);
  });

  it("a slow endpoint's backlog takes only its own share of the queue's bucket", async () => {
    const keys = keysOf();
    const queue = bucketOf('q', { count: 100, intervalMs: 1_000 }); // 10 ms apart, burst 10
    // The queue's burst all but used up, so its bucket refuses the endpoint's jobs too.
    expect(admittedOf(await runAdmit(redis, keys, jobs(9, 'c'), { queue, endpointName: null }, OPTS))).toBe(9);
    const a = await runAdmit(redis, keys, jobs(20, 'a'), { queue, endpoint: bucketOf('endpoint:a', { count: 1, intervalMs: 1_000 }), endpointName: 'a' }, OPTS);
    expect(admittedOf(a)).toBe(1);
    expect(a[19]).toBeGreaterThanOrEqual(18_000);
    // Twenty places of the queue's (200 ms), not twenty seconds: jobs without the endpoint go within a second.
    const b = await runAdmit(redis, keys, jobs(20, 'b'), { queue, endpointName: null }, OPTS);
    expect(b[19]).toBeLessThanOrEqual(1_000);
  });

  it('no limit given: everything admitted, nothing written', async () => {
    const keys = keysOf();
    const r = await runAdmit(redis, keys, jobs(1_000, 'a'), { endpointName: 'e' }, OPTS);
    expect(admittedOf(r)).toBe(1_000);
    expect(await redis.exists(keys.bucket('q'), keys.bucket('endpoint:e'), keys.rules, keys.bookings)).toBe(0);
  });
});

describe('slow-down.lua', () => {
  it('holds the endpoint, halves its rate once per hold, at most to its bound', async () => {
    const keys = keysOf();
    const a = await runSlowDown(redis, keys, 'e', 300, 2, RECOVERY_MS);
    expect(a.level).toBe(1);
    // A burst's other calls met the same answer: the hold, not the halvings, grows.
    const b = await runSlowDown(redis, keys, 'e', 600, 2, RECOVERY_MS);
    expect(b.level).toBe(1);
    expect(b.until).toBeGreaterThan(a.until);
    const held = await runAdmit(redis, keys, jobs(3, 'a'), { endpoint: bucketOf('endpoint:e', { count: 100, intervalMs: 1_000 }), endpointName: 'e' }, OPTS);
    expect(admittedOf(held)).toBe(0);
    expect(held[0]).toBeGreaterThan(300);
    expect(held[0]).toBeLessThanOrEqual(600);
    await sleep((held[0] as number) + 20);
    expect((await runSlowDown(redis, keys, 'e', 50, 2, RECOVERY_MS)).level).toBe(2);
    await new Promise((r) => setTimeout(r, 80));
    expect((await runSlowDown(redis, keys, 'e', 50, 2, RECOVERY_MS)).level).toBe(2); // the bound
    expect(await redis.zscore(keys.slowed, 'e')).not.toBeNull();
  });

  it('after the hold the endpoint runs at its halved rate', async () => {
    const keys = keysOf();
    await runSlowDown(redis, keys, 'e', 1, 4, RECOVERY_MS);
    await new Promise((r) => setTimeout(r, 10));
    const r = await runAdmit(redis, keys, jobs(100, 'a'), { endpoint: bucketOf('endpoint:e', { count: 100, intervalMs: 1_000 }), endpointName: 'e' }, OPTS);
    // Half of 100 a second: the burst of 10 stays 10 places, each twice as long.
    expect(admittedOf(r)).toBe(10);
    expect((r[20] as number) - (r[19] as number)).toBeGreaterThanOrEqual(19);
    expect((r[20] as number) - (r[19] as number)).toBeLessThanOrEqual(21);
  });

  it('an endpoint with no rule, slowed, is spaced after its hold, not sent all at once', async () => {
    const keys = keysOf();
    await runSlowDown(redis, keys, 'e', 200, 4, RECOVERY_MS);
    const r = await runAdmit(redis, keys, jobs(10, 'a'), { endpointName: 'e' }, OPTS);
    expect(admittedOf(r)).toBe(0);
    expect(r[0]).toBeGreaterThan(100);
    // The slowed default (10 a second) halved once: 200 ms apart.
    for (let i = 1; i < 10; i++) expect((r[i] as number) - (r[i - 1] as number)).toBeGreaterThanOrEqual(199);
  });
});
