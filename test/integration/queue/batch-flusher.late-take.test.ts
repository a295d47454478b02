// Regression test (found by an adversarial review, 2026-11-23). Before the fix: the flusher gives up on a take after 2 s and ends
// its connection, but unlike the claim path it drops a take's late answer. A take
// that ran in time (the batches are out of Redis) but whose answer is read after
// the timeout fired (here: the flusher's process stalls 2.5 s, as in a long GC
// pause, CPU throttling or a frozen container) loses those batches: they are in
// neither Redis nor the database's batches until the reconciliation pass.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '../../../src/core/redis.js';
import type { DueBatch } from '../../../src/queue/scripts/batch-scripts.js';
import { createBatchFlusher } from '../../../src/queue/batcher/batch-flusher.js';
import { createBatcher } from '../../../src/queue/batcher/batcher.js';
import { sleep } from '../../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redis-server.js';

let server: PrivateRedis;
let api: RedisClient;
let flusherRedis: RedisClient;

beforeAll(async () => {
  server = await startPrivateRedis();
  api = createRedis(server.url, 'adv-api');
  flusherRedis = createRedis({ url: server.url, socketTimeoutMs: 3_000 }, 'adv-flusher', { lazyConnect: true });
});
afterAll(async () => {
  api?.disconnect();
  flusherRedis?.disconnect();
  await server?.stop();
});

it('a take answered after the flusher stopped waiting does not lose its batches', async () => {
  const opts = { name: 'advf', batchSize: 100, maxWaitMs: 1_500 };
  const apiBatcher = createBatcher(api, opts);
  const flusherBatcher = createBatcher(flusherRedis, opts);
  const committed: string[] = [];
  const errors: string[] = [];
  const flusher = createBatchFlusher({
    batcher: flusherBatcher,
    redis: flusherRedis,
    onBatch: async (batches: readonly DueBatch[]) => void committed.push(...batches.flatMap((b) => b.items.map((i) => i.item))),
    log: { debug() {}, info() {}, warn() {}, error: (o, m) => void errors.push(`${m}: ${String((o as { err?: unknown }).err)}`) },
    idleRecheckMs: 60_000,
  });
  const takes: string[] = [];
  const origTake = flusherBatcher.takeDue.bind(flusherBatcher);
  (flusherBatcher as { takeDue: typeof origTake }).takeDue = (shard: number, max?: number) => {
    const t0 = Date.now();
    const p = origTake(shard, max);
    void p.then((r) => takes.push(`sent+${Date.now() - t0}ms late=${r.late} batches=${r.batches.length}`));
    return p;
  };
  await flusherRedis.connect();
  await flusher.start();

  let armed = false;
  const orig = flusherRedis.sendCommand.bind(flusherRedis);
  (flusherRedis as unknown as { sendCommand: typeof orig }).sendCommand = ((cmd: { name: string }, stream?: unknown) => {
    const p = orig(cmd as never, stream as never);
    if (armed && (cmd.name === 'evalsha' || cmd.name === 'eval')) {
      armed = false;
      setImmediate(() => {
        const end = Date.now() + 2_500; // the process stalls right after sending the take
        while (Date.now() < end) {
          /* spin */
        }
      });
    }
    return p;
  }) as typeof orig;

  await apiBatcher.add('areaA', 'p1');
  await apiBatcher.add('areaA', 'p2');
  armed = true; // the take at the group's deadline (1.5 s from now) hits the stall
  await sleep(6_000);
  const waiting = await apiBatcher.waiting('areaA');
  console.log(JSON.stringify({ committed, waitingInRedis: waiting.count, errors: errors.slice(0, 3), takes }));
  await flusher.stop();
  // Sound: every item is either committed or still waiting in Redis.
  expect(committed.length + waiting.count).toBe(2);
}, 30_000);
