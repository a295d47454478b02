// Pause and resume under load with three worker processes (test/helpers/pause-worker.ts
// prints every handler start with its time): nothing starts while paused past
// a grace for what was already running, nothing is lost or run twice, and
// after resume each process takes the backlog in due order; a paused type
// waits while the other flows; and a Redis restarted without the pause comes
// back unpaused until the pause check logs it, audits it and re-applies it
// (and a resume Redis lost is lifted the same way). A claim that ran just
// before the pause and answers after it is announced starts nothing, and a
// worker whose wake connection was down when the pause was announced hands
// back its waiting jobs once it is back.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createRedis } from '../../../src/core/redis.js';
import { createPauseCheck } from '../../../src/modules/admin/queue-controls.check.js';
import { asTheOnlyChecker } from '../../../src/modules/admin/sql/queue-controls.js';
import { createQueueControls } from '../../../src/modules/admin/queue-controls.service.js';
import { createWorker } from '../../../src/queue/consumer/worker.js';
import { createQueue } from '../../../src/queue/producer/queue.js';
import { runClaim } from '../../../src/queue/scripts/scripts.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { type Harness, harness } from '../../helpers/queues.js';
import { REDIS_URL, waitFor } from '../../helpers/redis.js';
import { startTcpProxy } from '../../helpers/tcp-proxy.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redis-server.js';

const CHILD = fileURLToPath(new URL('../../helpers/pause-worker.ts', import.meta.url));
/**
 * How long after pause() returns a handler may still start: a claim already
 * on its way when the pause was written hands its jobs over (the target is
 * 100 ms; five times that for a loaded machine).
 */
const GRACE_MS = 500;

type Start = { id: string; type: string; due: number; at: number; pid: number };
type Workers = { starts: Start[]; stop(): Promise<void> };

async function startWorkers(queueName: string, n: number): Promise<Workers> {
  const starts: Start[] = [];
  const children: ChildProcess[] = [];
  let ready = 0;
  for (let i = 0; i < n; i++) {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, queueName], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line === 'READY') ready++;
      else starts.push(JSON.parse(line) as Start);
    });
  }
  expect(await waitFor(() => ready === n, 30_000)).toBe(true);
  return {
    starts,
    async stop() {
      await Promise.all(
        children.map((c) => {
          if (c.exitCode !== null) return Promise.resolve();
          c.kill('SIGTERM');
          return new Promise((r) => c.once('exit', r));
        }),
      );
    },
  };
}

/** For each process, the due times of the jobs it started after `from`, in start order, must not go down. */
function dueOrderBreaks(starts: readonly Start[], from: number): string[] {
  const breaks: string[] = [];
  const last = new Map<number, Start>();
  for (const s of starts.filter((x) => x.at >= from)) {
    const prev = last.get(s.pid);
    if (prev && s.due < prev.due) breaks.push(`pid ${s.pid}: ${s.id} (due ${s.due}) after ${prev.id} (due ${prev.due})`);
    last.set(s.pid, s);
  }
  return breaks;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ids = (starts: readonly Start[]) => new Set(starts.map((s) => s.id));

let h: Harness | undefined;
let w: Workers | undefined;
afterEach(async () => {
  await w?.stop();
  await h?.close();
  w = undefined;
  h = undefined;
});

describe('pause and resume under load', () => {
  it('a paused queue starts nothing past the grace, loses nothing, and resumes in due order', async () => {
    h = harness('pause-load', { a: {}, b: {} });
    w = await startWorkers(h.queue.name, 3);
    // Due over 3 s from when each is scheduled, scheduled out of order.
    const jobs = Array.from({ length: 1_500 }, (_, i) => ({ id: `j${i}`, type: i % 2 ? 'a' : 'b', delayMs: (i * 7919) % 3_000 }));
    let lastDue = 0;
    for (let i = 0; i < jobs.length; i += 500) {
      for (const r of await h.queue.scheduleMany(jobs.slice(i, i + 500))) lastDue = Math.max(lastDue, r.dueAt);
    }
    // Paused in the middle of the flow.
    expect(await waitFor(() => w!.starts.length >= 100, 10_000)).toBe(true);
    await h.queue.pause();
    const pausedAt = Date.now();
    // Accepted while paused.
    const late = Array.from({ length: 300 }, (_, i) => ({ id: `late${i}`, type: 'a', at: Date.now() - 1_000 + i }));
    const r = await h.queue.scheduleMany(late);
    expect(r.every((x) => x.status === 'created')).toBe(true);
    await sleep(Math.max(0, lastDue - Date.now()) + 1_000); // every job is due by now
    const stats = await h.queue.stats();
    expect(stats).toMatchObject({ inFlight: 0, paused: ['*'] });
    expect(stats.dueNow).toBeGreaterThan(0);
    const resumedAt = Date.now();
    const whilePaused = w.starts.filter((s) => s.at > pausedAt + GRACE_MS && s.at < resumedAt);
    expect(whilePaused).toEqual([]);
    const startedBefore = w.starts.filter((s) => s.at <= pausedAt + GRACE_MS).length;

    await h.queue.resume();
    const all = jobs.length + late.length;
    expect(await waitFor(() => ids(w!.starts).size === all, 30_000)).toBe(true);
    expect(w.starts.length).toBe(all); // none twice
    expect(dueOrderBreaks(w.starts, resumedAt)).toEqual([]);
    // The backlog ran after the resume, not before the pause.
    expect(startedBefore).toBeLessThan(jobs.length);
    expect(await waitFor(async () => (await h!.queue.stats()).inFlight === 0, 5_000)).toBe(true);
    expect(await h.queue.stats()).toMatchObject({ pending: 0, parked: 0, dead: 0 });
  });

  it('a paused type waits, parked, while the other type flows; a parked job cancels by id; resumed, the rest run in due order', async () => {
    h = harness('pause-type', { a: {}, b: {} });
    w = await startWorkers(h.queue.name, 3);
    await h.queue.pause('a');
    const now = Date.now();
    const jobs = Array.from({ length: 400 }, (_, i) => ({ id: `t${i}`, type: i % 2 ? 'a' : 'b', at: now + ((i * 7919) % 500) }));
    await h.queue.scheduleMany(jobs);
    expect(await waitFor(() => w!.starts.filter((s) => s.type === 'b').length === 200, 20_000)).toBe(true);
    expect(await waitFor(async () => (await h!.queue.stats()).parked === 200, 5_000)).toBe(true);
    expect(w.starts.filter((s) => s.type === 'a')).toEqual([]); // paused before they were scheduled: none may start
    expect((await h.queue.get('t1'))?.parked).toBe(true);
    // Found by id while parked: cancelled, it is gone from the parked set too.
    expect(await h.queue.cancel('t1')).toEqual({ cancelled: true, state: 'pending' });
    expect(await h.queue.stats()).toMatchObject({ parked: 199, pending: 199 });

    const resumedAt = Date.now();
    expect(await h.queue.resume('a')).toEqual({ changed: true, moved: 199 });
    expect(await waitFor(() => ids(w!.starts).size === 399, 20_000)).toBe(true);
    await sleep(200);
    expect(w.starts.length).toBe(399);
    expect(ids(w.starts).has('t1')).toBe(false);
    expect(dueOrderBreaks(w.starts, resumedAt)).toEqual([]);
  });
});

describe('a Redis that lost its pause', () => {
  let redis: PrivateRedis;
  let tdb: TestDb;
  afterAll(async () => {
    await tdb?.drop();
    await redis?.stop();
  });

  it('comes back unpaused; the pause check logs it, writes an audit row and re-applies it (a lost resume too)', async () => {
    redis = await startPrivateRedis(); // no persistence: a restart loses every write
    tdb = await createTestDb('pause_check');
    const client = createRedis({ url: redis.url }, 'pause-check-test');
    const queue = createQueue(client, { name: 'orders', types: { expire: {} } });
    const lines: { level: number; msg: string; queue?: string; type?: string }[] = [];
    const log = pino({ level: 'warn' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    const controls = createQueueControls({ db: tdb.db, queues: [queue] });
    const check = createPauseCheck({ db: tdb.db, queues: [queue], log });
    try {
      expect(await controls.pause('orders', { by: 'tester', reason: 'provider down' })).toMatchObject({ paused: true, changed: true });
      expect(await controls.pause('orders', { by: 'tester' })).toMatchObject({ paused: true, changed: false });
      expect(await check.runOnce()).toEqual({ reapplied: [] });

      await redis.kill();
      await redis.restart();
      expect(await waitFor(async () => (await client.ping().catch(() => '')) === 'PONG', 10_000)).toBe(true);
      expect((await queue.pauseState()).queue).toBe(false); // lost with the restart

      expect(await check.runOnce()).toEqual({ reapplied: ['orders/*'] });
      expect(lines.some((l) => l.msg.includes('pause lost in Redis') && l.queue === 'orders' && l.type === '*')).toBe(true);
      expect((await queue.pauseState()).queue).toBe(true);
      expect((await runClaim(client, queue.keys[0]!, 10, 30_000, 10)).paused).toBe(true);
      const audit = await controls.audit('orders', 10);
      expect(audit.map((a) => [a.action, a.actor])).toEqual([
        ['REAPPLY', 'pause-check'],
        ['PAUSE', 'tester'],
        ['PAUSE', 'tester'],
      ]);
      expect(await check.runOnce()).toEqual({ reapplied: [] }); // repaired: said once

      // A resume Redis lost (the pause back in Redis, PostgreSQL says resumed) is lifted the same way.
      expect(await controls.resume('orders', { by: 'tester' })).toMatchObject({ paused: false, changed: true });
      await queue.pause();
      expect(await check.runOnce()).toEqual({ reapplied: ['orders/*:resume'] });
      expect((await queue.pauseState()).queue).toBe(false);
      expect((await controls.audit('orders', 1))[0]).toMatchObject({ action: 'REAPPLY', reason: 'resume missing in Redis' });

      // Every API process runs the check: while one holds the check's lock, another's pass stands back.
      await queue.pause();
      expect(await asTheOnlyChecker(tdb.db, 10_000, () => check.runOnce())).toBeNull();
      expect((await queue.pauseState()).queue).toBe(true);
      expect(await check.runOnce()).toEqual({ reapplied: ['orders/*:resume'] });
      expect((await controls.audit('orders', 10)).filter((a) => a.action === 'REAPPLY')).toHaveLength(3);
    } finally {
      client.disconnect();
    }
  });
});

describe('a claim answered after the pause is announced', () => {
  it('hands its jobs back at their due times instead of starting them; resumed, each runs once', async () => {
    h = harness('pause-late-claim', { a: {} });
    const redisPort = Number(new URL(REDIS_URL).port || 6379);
    const proxy = await startTcpProxy({ port: redisPort });
    // The worker's commands go through the proxy, its Pub/Sub does not: the
    // claim's answer can be held back while the pause announcement arrives.
    const slow = createRedis(`redis://127.0.0.1:${proxy.port}`, 'late-claim');
    const sub = createRedis(REDIS_URL, 'late-claim-sub');
    const started: string[] = [];
    const worker = createWorker({
      queue: createQueue(slow, { name: h.queue.name, types: { a: {} } }),
      redis: slow,
      subscriber: sub,
      handlers: { a: async (job) => void started.push(job.id) },
      idleRecheckMs: 60_000,
      claimTimeoutMs: 10_000,
    });
    try {
      await worker.start();
      proxy.delay(1_500, 'answers');
      const due = await h.queue.scheduleMany([0, 1, 2].map((i) => ({ id: `late-${i}`, type: 'a', delayMs: i })));
      // The claim ran in Redis (its jobs are in flight) while its answer is held back; then the pause.
      expect(await waitFor(async () => (await h!.queue.stats()).inFlight === 3, 5_000)).toBe(true);
      await h.queue.pause();
      // The answer arrives after the announcement: nothing starts, the jobs go back pending at their due times.
      expect(await waitFor(async () => (await h!.queue.stats()).pending === 3, 10_000)).toBe(true);
      expect(started).toEqual([]);
      for (const [i, r] of due.entries()) expect(await h.queue.get(`late-${i}`)).toMatchObject({ state: 'pending', attempts: 0, dueAt: r.dueAt });
      proxy.delay(0);
      await h.queue.resume();
      expect(await waitFor(() => started.length === 3, 10_000)).toBe(true);
      expect(started.sort()).toEqual(['late-0', 'late-1', 'late-2']);
    } finally {
      await worker.stop();
      slow.disconnect();
      sub.disconnect();
      await proxy.close();
    }
  });
});

describe('a pause announced while a worker was not listening', () => {
  it('once its wake connection is back, the worker hands back the jobs waiting in it; resumed, each runs once', async () => {
    h = harness('pause-unheard', { a: {} });
    const redisPort = Number(new URL(REDIS_URL).port || 6379);
    const proxy = await startTcpProxy({ port: redisPort });
    const direct = createRedis(REDIS_URL, 'unheard');
    const sub = createRedis(`redis://127.0.0.1:${proxy.port}`, 'unheard-sub');
    const started: string[] = [];
    let unblock = () => {};
    const blocked = new Promise<void>((r) => (unblock = r));
    const worker = createWorker({
      queue: createQueue(direct, { name: h.queue.name, types: { a: {} } }),
      redis: direct,
      subscriber: sub,
      concurrency: 1,
      prefetch: 10,
      handlers: {
        a: async (job) => {
          started.push(job.id);
          if (job.id === 'block') await blocked;
        },
      },
    });
    try {
      await worker.start();
      await h.queue.schedule({ id: 'block', type: 'a', delayMs: 0 });
      expect(await waitFor(() => started.includes('block'), 5_000)).toBe(true);
      await h.queue.scheduleMany([1, 2, 3, 4, 5].map((i) => ({ id: `w${i}`, type: 'a', delayMs: 0 })));
      // Claimed, waiting behind the blocked job.
      expect(await waitFor(async () => (await h!.queue.stats()).inFlight === 6, 5_000)).toBe(true);
      // The wake connection goes down; the pause is announced while it is.
      const down = proxy.refuse(1_500);
      expect(proxy.dropAll()).toBeGreaterThan(0);
      await h.queue.pause();
      await down;
      // Back: the waiting jobs go back pending; the running one goes on.
      expect(await waitFor(async () => (await h!.queue.stats()).pending === 5, 10_000)).toBe(true);
      unblock();
      expect(await waitFor(async () => (await h!.queue.stats()).inFlight === 0, 5_000)).toBe(true);
      expect(started).toEqual(['block']);
      await h.queue.resume();
      expect(await waitFor(() => started.length === 6, 10_000)).toBe(true);
      expect(started.slice(1).sort()).toEqual(['w1', 'w2', 'w3', 'w4', 'w5']);
    } finally {
      unblock();
      await worker.stop();
      direct.disconnect();
      sub.disconnect();
      await proxy.close();
    }
  });
});
