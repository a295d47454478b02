// Lateness summaries in real Redis: recorders in two "processes" writing the
// same seconds merge (counts add up, the max stays the largest), nothing is
// written per job before a flush, the keys expire, and the reader turns them
// back into per-second points with bucket-estimated quantiles.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { latenessKeys } from '../../../src/queue/keys.js';
import { createLatenessReader, quantileOf } from '../../../src/queue/telemetry/lateness-reader.js';
import { LATENESS_BUCKETS_MS, LATENESS_TTL_MS, bucketOf, createLatenessRecorder } from '../../../src/queue/telemetry/lateness-recorder.js';
import { silentLogger } from '../../../src/queue/types.js';
import { dropPrefix, redisClient } from '../../helpers/redis.js';

const redis = redisClient('lateness-test');
const prefix = `tlat${randomBytes(4).toString('hex')}`;
afterAll(async () => {
  await dropPrefix(redis, prefix);
  redis.disconnect();
});

const recorder = () => createLatenessRecorder({ redis, prefix, log: silentLogger, flushEveryMs: 60_000 });

describe('lateness summaries', () => {
  it('merges what several workers saw in one second, and writes only on flush', async () => {
    const second = Math.floor(Date.now() / 1_000) * 1_000 - 5_000;
    const a = recorder();
    const b = recorder();
    for (const ms of [0.5, 3, 3, 40]) a.observe('orders', ms, second + 10);
    for (const ms of [7, 900, -2]) b.observe('orders', ms, second + 990);
    b.observe('parcels', 12_000, second + 500);
    const k = latenessKeys(prefix, 'orders', second - (second % 60_000));
    expect(await redis.exists(k.summary, k.max)).toBe(0);
    await Promise.all([a.flush(), b.flush()]);

    const ttl = await redis.pttl(k.summary);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(LATENESS_TTL_MS);
    expect(await redis.pttl(k.max)).toBeGreaterThan(0);

    const [orders, parcels] = await createLatenessReader(redis, prefix).read(['orders', 'parcels'], second - 60_000, second + 60_000);
    expect(orders!.points).toHaveLength(1);
    const p = orders!.points[0]!;
    expect(p).toMatchObject({ t: second, count: 7, maxMs: 900 });
    expect(p.meanMs).toBeCloseTo((0.5 + 3 + 3 + 40 + 7 + 900 + 0) / 7, 2);
    // 4 of 7 are at most 5 ms: the median is inside the (2, 5] bucket.
    expect(p.p50Ms).toBeGreaterThan(2);
    expect(p.p50Ms).toBeLessThanOrEqual(5);
    expect(p.p99Ms).toBeGreaterThan(500);
    expect(p.p99Ms).toBeLessThanOrEqual(900);
    expect(parcels!.points).toEqual([expect.objectContaining({ t: second, count: 1, maxMs: 12_000, p50Ms: 11_000 })]);
  });

  it('keeps a larger max written earlier when a later flush of the same second has a smaller one', async () => {
    const second = Math.floor(Date.now() / 1_000) * 1_000 - 20_000;
    const r = recorder();
    r.observe('appointments', 250, second);
    await r.flush();
    r.observe('appointments', 4, second);
    await r.flush();
    const [s] = await createLatenessReader(redis, prefix).read(['appointments'], second, second + 1_000);
    expect(s!.points).toEqual([expect.objectContaining({ count: 2, maxMs: 250 })]);
  });

  it('reads only the asked window, oldest first, across minutes', async () => {
    const base = Math.floor(Date.now() / 60_000) * 60_000 - 3 * 60_000;
    const r = recorder();
    for (const offset of [-61_000, 0, 30_000, 61_000, 125_000]) r.observe('notifications', 1, base + offset);
    await r.stop(); // stop writes what is left
    const [s] = await createLatenessReader(redis, prefix).read(['notifications'], base, base + 61_000);
    expect(s!.points.map((p) => p.t - base)).toEqual([0, 30_000, 61_000]);
  });

  it('estimates quantiles from the buckets, never above the max', () => {
    const buckets = new Array<number>(LATENESS_BUCKETS_MS.length + 1).fill(0);
    buckets[bucketOf(8)] = 10; // (5, 10]
    expect(quantileOf(buckets, 9, 0.5)).toBe(7); // (5, 9]: the bucket ends at the max
    expect(quantileOf(buckets, 9, 1)).toBe(9);
    const top = new Array<number>(LATENESS_BUCKETS_MS.length + 1).fill(0);
    top[LATENESS_BUCKETS_MS.length] = 2;
    expect(quantileOf(top, 60_000, 0.5)).toBeGreaterThan(10_000);
    expect(quantileOf(top, 60_000, 0.99)).toBeLessThanOrEqual(60_000);
    expect(quantileOf(new Array<number>(14).fill(0), 0, 0.5)).toBe(0);
  });
});
