// The rate limiter's buckets on the real Redis: the decisions asked of a
// bucket in one event-loop turn share one script call and are judged in the
// order asked, takes and checks alike, as that many calls one after the other
// would be; buckets never mix; a check records nothing; the bucket is kept in
// whole µs; without Redis every request goes on (the contact limit's kind
// refuses instead); a busy event loop is not Redis away (review 2026-11-26,
// S6, S7). Rates of one an hour, so no admission comes back while a test
// runs, however slow the machine, except where a test measures a rate.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '../../../src/core/redis.js';
import { rateLimit, type Verdict } from '../../../src/core/rate-limit.js';
import { REDIS_CALL_TIMEOUT_MS, RedisUnavailableError } from '../../../src/core/redis-call.js';
import { dropPrefix, REDIS_URL } from '../../helpers/redis.js';
import { startPrivateRedis } from '../../helpers/redis-server.js';

const redis = createRedis(REDIS_URL, 'rate-limit-test');
const prefix = `rl${randomBytes(3).toString('hex')}`;
beforeAll(async () => {
  await redis.ping(); // ready: a limiter lets everything through while its connection is not
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  redis.disconnect();
});

/** The same client, counting the script calls made through it (each still goes to Redis). */
function counting(client: RedisClient): { client: RedisClient; calls: () => number } {
  let calls = 0;
  const proxy = new Proxy(client, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      // A registered script is a command ioredis defines on the client, sent as EVALSHA (EVAL once per connection).
      if (prop === 'rlGcra') {
        return (...args: unknown[]) => {
          calls++;
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return (v as (...a: unknown[]) => unknown).bind(target);
    },
  });
  return { client: proxy, calls: () => calls };
}

const oks = (vs: Verdict[]) => vs.map((v) => v.ok);
const HOURLY = 1 / 3_600;
// One an hour, a burst of 5: a fresh bucket admits 5 at once, then none while a test runs.
const limiter = (client: RedisClient, name: string) => rateLimit(client, prefix, name, HOURLY, 5);

describe('rate limit', () => {
  it('judges the takes of one turn in one call, in the order asked, as one call each would', async () => {
    const c = counting(redis);
    const l = limiter(c.client, 'turn');
    const gathered = await Promise.all(Array.from({ length: 8 }, () => l.take('k1')));
    expect(c.calls()).toBe(1);
    expect(oks(gathered)).toEqual([true, true, true, true, true, false, false, false]);
    // Refused: each told to wait, about the hour of one admission.
    for (const v of gathered.slice(5)) expect(v.ok ? 0 : v.retryAfterMs).toBeGreaterThan(3_500_000);

    const alone: Verdict[] = [];
    for (let i = 0; i < 8; i++) alone.push(await l.take('k2'));
    expect(oks(alone)).toEqual(oks(gathered));

    // The bucket is the same from one turn to the next: full now.
    expect((await l.take('k1')).ok).toBe(false);
  });

  it('judges takes and checks of one bucket in the order asked; a check records nothing; buckets stay apart', async () => {
    const c = counting(redis);
    const l = rateLimit(c.client, prefix, 'mixed', HOURLY, 1);
    // As one call each: the check before the take sees room, the one after it does not.
    expect(oks(await Promise.all([l.check('m'), l.take('m'), l.check('m'), l.take('m')]))).toEqual([true, true, false, false]);
    expect(c.calls()).toBe(1);

    const five = limiter(c.client, 'apart');
    const asked = await Promise.all([
      ...Array.from({ length: 4 }, () => five.take('a')),
      ...Array.from({ length: 7 }, () => five.check('b')),
      ...Array.from({ length: 6 }, () => five.take('c')),
    ]);
    expect(c.calls()).toBe(4);
    expect(oks(asked)).toEqual([...Array(4).fill(true), ...Array(7).fill(true), true, true, true, true, true, false]);
    // The checks of b took nothing: its burst is whole.
    expect(oks(await Promise.all(Array.from({ length: 6 }, () => five.take('b'))))).toEqual([true, true, true, true, true, false]);
    // a has one left of its burst.
    expect(oks(await Promise.all([five.take('a'), five.take('a')]))).toEqual([true, false]);
  });

  it('admits a whole burst at rates that do not divide a second, and keeps the bucket in whole µs', async () => {
    // Nine a minute, seven an hour: summed in ms, the last of a burst came out a hair over its tolerance.
    for (const [name, perSecond, burst] of [
      ['nine', 9 / 60, 9],
      ['seven', 7 / 3_600, 7],
    ] as const) {
      const l = rateLimit(redis, prefix, name, perSecond, burst);
      const v = await Promise.all(Array.from({ length: burst + 1 }, () => l.take('k')));
      expect(oks(v), name).toEqual([...Array(burst).fill(true), false]);
    }
    // At 21 000 a second a bucket in ms was stored as 0.1 ms (Lua's tostring) and never advanced.
    await rateLimit(redis, prefix, 'fast', 21_000, 10).take('k');
    expect(await redis.get(`${prefix}:rl2:fast:k`)).toMatch(/^\d{16}$/);
  });

  it('lets every request go on when Redis is not there; the refusing kind refuses', async () => {
    const gone = createRedis('redis://127.0.0.1:1', 'rate-limit-gone');
    try {
      const l = limiter(gone, 'gone');
      expect(oks(await Promise.all(Array.from({ length: 8 }, () => l.take('k'))))).toEqual(Array(8).fill(true));
      await expect(rateLimit(gone, prefix, 'gone', HOURLY, 5, 'refuse').take('k')).rejects.toBeInstanceOf(RedisUnavailableError);
    } finally {
      gone.disconnect();
    }
  });

  it('waits for a reply the busy event loop was late to read: at most the limit (+10 %) is admitted', async () => {
    // 20 a second, a burst of 20; every round asks 80 at once, then holds the
    // loop past the call's bound right after the call is written. A limiter
    // that judged its bound before reading the reply admitted all 240.
    const l = rateLimit(redis, prefix, 'busy', 20, 20);
    const t0 = performance.now();
    let admitted = 0;
    let refused = 0;
    for (let round = 0; round < 3; round++) {
      const asked = Promise.all(Array.from({ length: 80 }, () => l.take('k')));
      await new Promise((r) => setImmediate(r)); // after the gatherer's turn: the script call is written
      const until = performance.now() + REDIS_CALL_TIMEOUT_MS + 200;
      while (performance.now() < until); // the loop held, as by a burst of CPU-bound requests
      for (const v of await asked) {
        if (v.ok) admitted++;
        else refused++;
      }
    }
    const seconds = (performance.now() - t0) / 1_000;
    const limit = 20 + 20 * seconds;
    expect(refused, 'the verdicts came from Redis').toBeGreaterThan(0);
    expect(admitted).toBeLessThanOrEqual(Math.ceil(limit * 1.1));
  });

  it('with its server hung or gone: the admitting kind admits, the refusing kind fails with RedisUnavailableError', async () => {
    const server = await startPrivateRedis();
    const client = createRedis(server.url, 'rate-limit-outage');
    try {
      await client.ping();
      const admitting = limiter(client, 'outage');
      const refusing = rateLimit(client, prefix, 'outage-r', HOURLY, 5, 'refuse');
      expect((await refusing.take('k')).ok).toBe(true);

      server.pause(); // hung: no answer within the call's bound
      expect(oks(await Promise.all(Array.from({ length: 8 }, () => admitting.take('k'))))).toEqual(Array(8).fill(true));
      await expect(refusing.take('k')).rejects.toBeInstanceOf(RedisUnavailableError);
      server.resume();

      await server.kill(); // gone: a connection error, then a connection not ready
      for (let i = 0; i < 2; i++) {
        expect(oks(await Promise.all(Array.from({ length: 8 }, () => admitting.take('k'))))).toEqual(Array(8).fill(true));
        await expect(refusing.take('k')).rejects.toBeInstanceOf(RedisUnavailableError);
      }
    } finally {
      client.disconnect();
      server.resume();
      await server.stop();
    }
  });
});
