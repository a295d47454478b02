// Outbound rate limits (queue/limits/): a limit holds across three worker
// processes sharing it through Redis, within a tenth over ten seconds; a job
// over its limit waits without using an attempt; a receiver answering 429
// with Retry-After slows its own endpoint only.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createQueue, createQueueLimiter, createWorker, parseRules, silentLogger, type Job, type Worker } from '../../../src/queue/index.js';
import { dropPrefix, redisClient, uniqueQueueName } from '../../helpers/redis.js';
import { createMetrics } from '../../../src/core/metrics.js';
import { createWebhookPool } from '../../../src/core/webhook-call.js';
import { parseExposition, valueOf } from '../../helpers/prometheus.js';

const CHILD = fileURLToPath(new URL('../../helpers/limited-worker.ts', import.meta.url));
const redis = redisClient('rate-limit-test');
const prefixes: string[] = [];
const children: ChildProcess[] = [];
const closers: (() => Promise<unknown> | void)[] = [];
const newPrefix = () => {
  const p = uniqueQueueName('rl').replace(/^t-/, 'trl');
  prefixes.push(p);
  return p;
};

/** The child's job payload and endpoint (test/helpers/limited-worker.ts, a script: not imported). */
type LimitedJob = { url: string; endpoint: string };
const limitedJobKey = (job: Job) => (job.payload as LimitedJob).endpoint;

type Ran = { id: string; pid: number; at: number; attempts: number; endpoint: string };

/** A receiver: 204, or what `answer` says for the n-th call ([status, Retry-After seconds]). */
async function startReceiver(answer: (n: number) => [number, string?] = () => [204]): Promise<{ url: string; calls: number[]; server: Server }> {
  const calls: number[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      calls.push(Date.now());
      const [status, retryAfter] = answer(calls.length);
      res.writeHead(status, retryAfter === undefined ? {} : { 'retry-after': retryAfter });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => new Promise((r) => server.close(r)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, calls, server };
}

/** A worker process under `prefix`; resolves once it listens, `ran` filled as it runs jobs. */
function startChild(prefix: string, queue: string, rules: string, ran: Ran[]): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, prefix, queue, rules], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`worker exited early: ${code}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line === 'READY') resolve();
      else if (line.startsWith('{')) ran.push(JSON.parse(line) as Ran);
    });
  });
}

/** How many of `times` fall in [from, from + ms). */
const within = (times: readonly number[], from: number, ms: number) => times.filter((t) => t >= from && t < from + ms).length;
const perSecond = (times: readonly number[], from: number, seconds: number) =>
  Array.from({ length: seconds }, (_, s) => within(times, from + s * 1_000, 1_000));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  await redis.ping();
});

afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const close of closers.splice(0).reverse()) await close();
});

afterAll(async () => {
  for (const p of prefixes) await dropPrefix(redis, p);
  redis.disconnect();
});

describe('queue rate limits', () => {
  it('a queue limit holds across 3 worker processes within 10 % over 10 s, and waiting uses no attempt', { timeout: 60_000 }, async () => {
    const prefix = newPrefix();
    const name = uniqueQueueName('rl3');
    const receiver = await startReceiver();
    const ran: Ran[] = [];
    await Promise.all([0, 1, 2].map(() => startChild(prefix, name, `${name}=50/1s`, ran)));
    const queue = createQueue(redis, { name, prefix, types: { t: {} } });
    // A backlog well beyond what the limit lets through in the window.
    const jobs = Array.from({ length: 800 }, (_, i) => ({ id: `j${i}`, type: 't', delayMs: 0, payload: { url: receiver.url, endpoint: 'webhook:one' } }));
    await queue.scheduleMany(jobs);
    await sleep(11_500);
    const times = ran.map((r) => r.at).sort((a, b) => a - b);
    const start = times[0] as number;
    const inTen = within(times, start, 10_000);
    // 50 a second for 10 s, plus the burst of a tenth of the count.
    expect(inTen, `per second: ${perSecond(times, start, 10).join(' ')}`).toBeGreaterThanOrEqual(450);
    expect(inTen, `per second: ${perSecond(times, start, 10).join(' ')}`).toBeLessThanOrEqual(550);
    console.log(`3 processes, limit 50/s: ${inTen} in 10 s; per second ${perSecond(times, start, 10).join(' ')}`);
    // Every process ran some: the limit is shared, not one process's.
    expect(new Set(ran.map((r) => r.pid)).size).toBe(3);
    expect(new Set(ran.map((r) => r.id)).size).toBe(ran.length);
    expect(ran.every((r) => r.attempts === 1)).toBe(true);
    const left = await queue.stats();
    expect(left.dead).toBe(0);
  });

  it('a backlog is spread once: each refused job runs on its booked turn, none is sent to the back', { timeout: 60_000 }, async () => {
    const prefix = newPrefix();
    const name = uniqueQueueName('rlbook');
    const ran: number[] = [];
    const limiter = createQueueLimiter({ redis, prefix, rules: parseRules(`${name}=5/1s`), log: silentLogger });
    await limiter.start();
    closers.push(() => limiter.stop());
    const queue = createQueue(redis, { name, prefix, types: { t: {} } });
    const worker: Worker = createWorker({ queue, redis, limiter, concurrency: 10, handlers: { t: async () => void ran.push(Date.now()) } });
    closers.push(() => worker.stop());
    await worker.start();
    const t0 = Date.now();
    await queue.scheduleMany(Array.from({ length: 20 }, (_, i) => ({ id: `j${i}`, type: 't', delayMs: 0 })));
    const deadline = t0 + 20_000;
    while (ran.length < 20 && Date.now() < deadline) await sleep(100);
    // 5 a second, a burst of 1: the last of 20 is due 3.8 s in. A job late
    // for its turn moves no other; one refused again would go to the back
    // (over 6 s for this run). The margin is for a slow machine's polls.
    const last = Math.max(...ran) - t0;
    expect(ran.length).toBe(20);
    expect(last).toBeGreaterThanOrEqual(3_500);
    expect(last).toBeLessThanOrEqual(5_300);
    expect((await queue.stats()).dead).toBe(0);
  });

  it('a receiver answering 429 with Retry-After slows its own endpoint only', { timeout: 60_000 }, async () => {
    const prefix = newPrefix();
    const name = uniqueQueueName('rl429');
    // A answers 429 (Retry-After 1 s) to its first three calls, then takes everything; B always takes.
    const a = await startReceiver((n) => (n <= 3 ? [429, '1'] : [204]));
    const b = await startReceiver();
    const ranA: number[] = [];
    const ranB: number[] = [];
    const limiter = createQueueLimiter({ redis, prefix, rules: parseRules('endpoint:webhook:a=20/1s,endpoint:webhook:b=20/1s'), log: silentLogger });
    await limiter.start();
    closers.push(() => limiter.stop());
    const queue = createQueue(redis, { name, prefix, types: { t: { limitKey: limitedJobKey, maxAttempts: 10 } } });
    const call = createWebhookPool(5_000, 'the job');
    const worker: Worker = createWorker({
      queue,
      redis,
      limiter,
      concurrency: 10,
      handlers: {
        t: async (job: Job) => {
          const p = job.payload as LimitedJob;
          await call(new URL(p.url), '{}', {}, new AbortController().signal);
          (p.endpoint === 'webhook:a' ? ranA : ranB).push(Date.now());
        },
      },
    });
    closers.push(() => worker.stop());
    await worker.start();
    const t0 = Date.now();
    const jobs = Array.from({ length: 400 }, (_, i) => {
      const which = i % 2 === 0 ? a : b;
      return { id: `j${i}`, type: 't', delayMs: 0, payload: { url: which.url, endpoint: i % 2 === 0 ? 'webhook:a' : 'webhook:b' } };
    });
    await queue.scheduleMany(jobs);
    await sleep(5_500);
    // B: its 20 a second (plus its burst of 2) over 5 s, as if A were not
    // there (102; the margin below is for the start of the run on a loaded machine).
    const bIn5 = within(ranB, t0, 5_000);
    expect(bIn5, `B per second: ${perSecond(ranB, t0, 5).join(' ')}`).toBeGreaterThanOrEqual(85);
    expect(bIn5).toBeLessThanOrEqual(112);
    // A: held about a second, then at half its rate (10 a second) while it recovers.
    const aIn5 = within(ranA, t0, 5_000);
    console.log(
      `429 on A (halvings ${limiter.slowed().get('webhook:a')?.level}): A ${aIn5} (${perSecond(ranA, t0, 5).join(' ')}), B ${bIn5} (${perSecond(ranB, t0, 5).join(' ')}) in 5 s`,
    );
    expect(aIn5, `A per second: ${perSecond(ranA, t0, 5).join(' ')}`).toBeLessThanOrEqual(0.7 * bIn5);
    expect(limiter.slowed().has('webhook:a')).toBe(true);
    expect(limiter.slowed().has('webhook:b')).toBe(false);
    // The metric says so: A's rate halved (once or twice: a 429 after the first hold halves it again), B absent.
    const metrics = createMetrics();
    metrics.watchLimiter(limiter);
    const scraped = parseExposition(await metrics.exposition());
    expect(valueOf(scraped, 'ots_rate_limit_slowed', { endpoint: 'webhook:a' })).toBeGreaterThanOrEqual(1);
    expect(scraped.get('ots_rate_limit_slowed')?.samples.some((x) => x.labels.endpoint === 'webhook:b') ?? false).toBe(false);
  });
});
