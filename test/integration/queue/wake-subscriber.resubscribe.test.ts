// A wake-up subscriber whose re-subscription after a reconnect fails (the
// connection drops again before the answer, as when Redis restarts; here the
// server refuses it with NOPERM, the same rejection made certain) must not end
// the process, and must subscribe again once it can. ioredis' own
// re-subscription left that rejection unhandled: the orders model-based suite
// (2026-11-23) saw both worker processes die on one Redis restart, and the
// orders and notifications they owed were never cancelled or delivered.
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis } from '../../../src/core/redis.js';
import { silentLogger } from '../../../src/queue/index.js';
import { type WakeSubscriber, listenForWakeUps } from '../../../src/queue/wake/wake-subscriber.js';
import { waitFor } from '../../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redis-server.js';

const CHANNEL = 'wake-test:ch';
let server: PrivateRedis;
let admin: Redis;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  server = await startPrivateRedis();
  admin = new Redis(server.url);
  await admin.call('ACL', 'SETUSER', 'waker', 'on', '>waker-pw', '~*', '&*', '+@all');
  process.on('unhandledRejection', onUnhandled);
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  admin.disconnect();
  await server.stop();
});
afterEach(() => {
  unhandled.length = 0;
});

describe('wake subscriber re-subscription', () => {
  it('survives a refused re-subscription and subscribes again once allowed', async () => {
    const redis = createRedis(`redis://waker:waker-pw@127.0.0.1:${server.port}`, 'wake-test');
    const woken: number[] = [];
    const warnings: string[] = [];
    const log = { ...silentLogger, warn: (_: object, msg: string) => warnings.push(msg) };
    let wake: WakeSubscriber | null = null;
    try {
      wake = await listenForWakeUps({ redis, targets: [{ channel: CHANNEL, wakeAt: (at) => woken.push(at), wakeNow: () => {} }], idleRecheckMs: 60_000, log });
      await admin.publish(CHANNEL, '1');
      expect(await waitFor(() => woken.includes(1), 5_000)).toBe(true);

      // The channel forbidden and the subscriber's connection dropped: every
      // re-subscription is refused until the channel is allowed again.
      await admin.call('ACL', 'SETUSER', 'waker', 'resetchannels');
      await admin.call('CLIENT', 'KILL', 'USER', 'waker');
      // A few refused rounds (each one a rejection ioredis left unhandled before).
      await new Promise((r) => setTimeout(r, 2_500));
      expect(unhandled).toEqual([]);
      expect(warnings).toContain('wake subscriber could not subscribe again; reconnecting');

      await admin.call('ACL', 'SETUSER', 'waker', '&*');
      // Published until the subscriber is back (a reconnect round may take up to 2 s).
      expect(
        await waitFor(
          async () => {
            await admin.publish(CHANNEL, '2');
            return woken.includes(2);
          },
          10_000,
          100,
        ),
      ).toBe(true);
      expect(unhandled).toEqual([]);
    } finally {
      await wake?.stop();
      await closeRedis(redis);
    }
  });
});
