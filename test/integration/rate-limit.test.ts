// The rate limiter's buckets on the real Redis: the decisions asked of a
// bucket in one event-loop turn share one script call and are judged in the
// order asked, as that many calls one after the other would be; buckets and
// modes never mix; a check records nothing; without Redis every request goes on.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '../../src/core/redis.js';
import { rateLimit, type Verdict } from '../../src/core/rate-limit.js';
import { dropPrefix, REDIS_URL } from '../helpers/redis.js';

const redis = createRedis(REDIS_URL, 'rate-limit-test');
const prefix = `rl${randomBytes(3).toString('hex')}`;
beforeAll(async () => {
  await redis.ping(); // ready: a limiter lets everything through while its connection is not
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  redis.disconnect();
});

/** The same client, counting the script calls by digest made through it (each still goes to Redis). */
function counting(client: RedisClient): { client: RedisClient; calls: () => number } {
  let calls = 0;
  const proxy = new Proxy(client, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'evalsha' && typeof v === 'function') {
        return (...args: unknown[]) => {
          calls++;
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { client: proxy, calls: () => calls };
}

const oks = (vs: Verdict[]) => vs.map((v) => v.ok);
// One a second, a burst of 5: a fresh bucket admits 5 at once, then one a second.
const limiter = (client: RedisClient, name: string) => rateLimit(client, prefix, name, 1, 5);

describe('rate limit', () => {
  it('judges the takes of one turn in one call, in the order asked, as one call each would', async () => {
    const c = counting(redis);
    const l = limiter(c.client, 'turn');
    const gathered = await Promise.all(Array.from({ length: 8 }, () => l.take('k1')));
    expect(c.calls()).toBe(1);
    expect(oks(gathered)).toEqual([true, true, true, true, true, false, false, false]);
    // Refused: each told to wait, about a second (one admission's interval).
    for (const v of gathered.slice(5)) expect(v.ok ? 0 : v.retryAfterMs).toBeGreaterThan(0);

    const alone: Verdict[] = [];
    for (let i = 0; i < 8; i++) alone.push(await l.take('k2'));
    expect(oks(alone)).toEqual(oks(gathered));

    // The bucket is the same from one turn to the next: full now.
    expect((await l.take('k1')).ok).toBe(false);
  });

  it('keeps buckets and modes apart within a turn; a check records nothing', async () => {
    const c = counting(redis);
    const l = limiter(c.client, 'apart');
    const asked = await Promise.all([
      ...Array.from({ length: 4 }, () => l.take('a')),
      ...Array.from({ length: 7 }, () => l.check('b')),
      ...Array.from({ length: 6 }, () => l.take('c')),
    ]);
    expect(c.calls()).toBe(3);
    expect(oks(asked)).toEqual([...Array(4).fill(true), ...Array(7).fill(true), true, true, true, true, true, false]);
    // The checks of b took nothing: its burst is whole.
    const b = await Promise.all(Array.from({ length: 6 }, () => l.take('b')));
    expect(oks(b)).toEqual([true, true, true, true, true, false]);
    // a has one left of its burst.
    expect(oks(await Promise.all([l.take('a'), l.take('a')]))).toEqual([true, false]);
  });

  it('lets every request go on when Redis is not there', async () => {
    const gone = createRedis('redis://127.0.0.1:1', 'rate-limit-gone');
    try {
      const l = limiter(gone, 'gone');
      expect(oks(await Promise.all(Array.from({ length: 8 }, () => l.take('k'))))).toEqual(Array(8).fill(true));
    } finally {
      gone.disconnect();
    }
  });
});
