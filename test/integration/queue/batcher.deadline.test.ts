// Regression test (found by an adversarial review, 2026-11-23). Before the fix: the batcher's deadline (1 s) equals the API's
// Redis call timeout (1 s), and a late add force-samples the clock from the
// midpoint of a hung round trip (estimate ahead by half the hang). The next add
// then runs up to that much after its caller gave up: if it fills the group, it
// takes a full batch out that nobody commits (the F4 effect the deadline was
// meant to end).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '../../../src/core/redis.js';
import { redisCall } from '../../../src/core/redis-call.js';
import { createBatcher } from '../../../src/queue/batcher/batcher.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redis-server.js';

let server: PrivateRedis;
let api: RedisClient;
let probe: RedisClient;

beforeAll(async () => {
  server = await startPrivateRedis();
  api = createRedis({ url: server.url, socketTimeoutMs: 3_000 }, 'adv-api');
  probe = createRedis(server.url, 'adv-probe');
  await api.ping();
});
afterAll(async () => {
  server?.resume();
  api?.disconnect();
  probe?.disconnect();
  await server?.stop();
});

it('an add its caller gave up on takes no batch out', async () => {
  const H1 = Number(process.env.ADV_H1 ?? 2_500);
  const batcher = createBatcher(api, { name: 'advb', batchSize: 3, maxWaitMs: 3_600_000 });
  await redisCall(batcher.add('area1', 'p1'), 'add');
  await redisCall(batcher.add('area1', 'p2'), 'add');
  await redisCall(batcher.add('area2', 'x1'), 'add'); // a fresh sample with a small round trip

  let armed = false;
  let pausedAt = 0;
  const orig = api.sendCommand.bind(api);
  (api as unknown as { sendCommand: typeof orig }).sendCommand = ((cmd: { name: string }, stream?: unknown) => {
    if (armed && (cmd.name === 'evalsha' || cmd.name === 'eval')) {
      armed = false;
      server.pause();
      pausedAt = Date.now();
    }
    return orig(cmd as never, stream as never);
  }) as typeof orig;

  // Hang 1 (below the socket timeout): an intake's add is given up on after 1 s and runs late (changes nothing).
  if (H1 > 0) {
    server.pause();
    const late = batcher.add('area2', 'x2'); // what redisCall wraps; it keeps running after the caller's timeout
    await expect(redisCall(late, 'add')).rejects.toThrow(/no answer within/);
    await sleep(H1 - 1_000);
    server.resume();
    expect((await late).late).toBe(true);
  }

  // The next intake: Redis hangs 1.8 s while its add is on the wire.
  armed = true;
  const t0 = Date.now();
  const p = redisCall(batcher.add('area1', 'p3'), 'add');
  const outcome = await p.then(
    (r) => `answered: late=${r.late} taken=${r.batches.flat().length}`,
    (e: Error) => `caller gave up after ${Date.now() - t0} ms: ${e.message}`,
  );
  await sleep(1_800 - (Date.now() - pausedAt));
  server.resume();
  await waitFor(async () => (await probe.ping()) === 'PONG', 2_000);
  const left = await batcher.waiting('area1');
  console.log(JSON.stringify({ outcome, area1Waiting: left }));
  // Sound: either the caller saw the batch, or the add changed nothing (p1, p2 still wait, no p3).
  if (outcome.startsWith('caller gave up')) expect(left.count).toBe(2);
}, 30_000);
