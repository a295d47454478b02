// A Redis that hangs (SIGSTOP) while a claim is on its way, then wakes up: the
// claim the worker gave up on must not lease the due jobs to nobody. Every job
// runs within seconds of the server's return, on its first attempt, instead of
// sitting in flight until its 30 s lease runs out (review 2026-11-23, F16).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '../../../src/core/redis.js';
import { createQueue, type Queue } from '../../../src/queue/producer/queue.js';
import type { QueueLogger } from '../../../src/queue/types.js';
import { createWorker, type Worker } from '../../../src/queue/consumer/worker.js';
import { redisNowMs, sleep, uniqueQueueName, waitFor } from '../../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redis-server.js';

const JOBS = 20;
const LEASE_MS = 30_000;
/** From scheduling to due: time to start the worker and pause the server before the jobs fall due. */
const DUE_IN_MS = 2_500;
/** The server is paused this long before the jobs fall due, so the claim at their due time hits the hang. */
const PAUSE_BEFORE_DUE_MS = 700;
/**
 * How long the server stays paused: past the claim's deadline (1 s) and the
 * connection's socket timeout (3 s), and long enough that the worker has
 * closed the connection the claim went out on before the server reads it.
 * (The build before the fix gave up on a claim after 5 s with a 1 s idle
 * re-check, and ioredis destroys a connection it ended 2 s later: before
 * that, the answer still came back on the half-closed socket.)
 */
const PAUSED_MS = 9_000;
/** After the server's return every job must have run by then: far less than the lease. */
const RUN_WITHIN_MS = 8_000;

let server: PrivateRedis;
let producer: RedisClient;
let workerRedis: RedisClient;
let worker: Worker | undefined;
let queue: Queue;

beforeAll(async () => {
  server = await startPrivateRedis();
  producer = createRedis(server.url, 'hang-producer');
  workerRedis = createRedis(server.url, 'hang-worker');
  queue = createQueue(producer, { name: uniqueQueueName('hang'), types: { t: {} }, shards: 2 });
});
afterAll(async () => {
  server?.resume(); // a failed assertion may leave it paused
  await worker?.stop();
  workerRedis?.disconnect();
  producer?.disconnect();
  await server?.stop(); // the private server goes with every key of the test
});

describe('a claim into a hung Redis', () => {
  it('leases nothing to nobody: the due jobs run soon after the server returns, not after their lease', async () => {
    const runs: { id: string; attempts: number }[] = [];
    const claimErrors: string[] = [];
    const log: QueueLogger = {
      debug() {},
      info() {},
      warn() {},
      error(o, msg) {
        if (msg.startsWith('claim failed')) claimErrors.push(String((o as { err?: unknown }).err));
      },
    };
    const scheduled = await queue.scheduleMany(Array.from({ length: JOBS }, (_, i) => ({ id: `job-${i}`, type: 't', delayMs: DUE_IN_MS })));
    const dueAt = Math.max(...scheduled.map((r) => r.dueAt));
    worker = createWorker({
      queue,
      redis: workerRedis,
      handlers: { t: (job) => void runs.push({ id: job.id, attempts: job.attempts }) },
      leaseMs: LEASE_MS,
      claimTimeoutMs: 1_000,
      idleRecheckMs: 1_000,
      log,
    });
    await worker.start();

    expect(await waitFor(async () => (await redisNowMs(producer)) >= dueAt - PAUSE_BEFORE_DUE_MS, DUE_IN_MS + 5_000)).toBe(true);
    server.pause();
    await sleep(PAUSED_MS);
    expect(runs).toEqual([]); // nothing ran while the server hung
    server.resume();

    const ranInTime = await waitFor(() => runs.length >= JOBS, RUN_WITHIN_MS, 50);
    // Failing, this shows where the jobs wait: in flight, leased to nobody, is the defect.
    const { inFlight, pending } = await queue.stats();
    expect(ranInTime, `${runs.length} of ${JOBS} jobs ran; in flight ${inFlight}, pending ${pending}`).toBe(true);
    // The hang reached a claim: the worker gave up waiting for its answer.
    expect(claimErrors.some((e) => e.includes('TimeoutError'))).toBe(true);
    expect(runs.map((r) => r.id).sort()).toEqual(Array.from({ length: JOBS }, (_, i) => `job-${i}`).sort());
    // The claim nobody received burned no attempt, and ran nothing twice.
    expect(runs.every((r) => r.attempts === 1)).toBe(true);
    expect(await waitFor(async () => (await queue.stats()).inFlight === 0, 5_000, 50)).toBe(true);
    expect(await queue.stats()).toMatchObject({ pending: 0, inFlight: 0, dead: 0 });
  });
});
