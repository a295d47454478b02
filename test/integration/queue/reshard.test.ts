// Changing a queue's shard count while it runs (producer/reshard.ts): 1 -> 4
// -> 2 with a producer scheduling, cancelling and moving jobs all along and
// two workers (each with its own Queue, as two processes have) handling them:
// every job is delivered exactly once, none cancelled while pending runs,
// dead jobs keep their place in the dead set, and at the end nothing is left
// in a shard the count dropped. Both ways a job moves: one script (one Redis
// server) and copy, remove, settle (a Redis Cluster's; on the cluster suite
// both runs take it). The start-up check still refuses a count changed in
// the configuration alone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../../src/core/redis.js';
import { QueueLayoutError, checkQueueLayout } from '../../../src/queue/checks/layout-check.js';
import { createWorker, type Worker } from '../../../src/queue/consumer/worker.js';
import { reshardKey, reshardLockKey, shardCountKey, shardKeys, shardOf } from '../../../src/queue/keys.js';
import { reshard } from '../../../src/queue/producer/reshard.js';
import { alignPauseState, copyPauseState } from '../../../src/queue/producer/reshard-pause.js';
import { runInspect, runPause } from '../../../src/queue/scripts/admin-scripts.js';
import { runLayoutFence, runReshardLock, runReshardStep } from '../../../src/queue/scripts/move-scripts.js';
import { runSchedule } from '../../../src/queue/scripts/schedule-scripts.js';
import { runClaim, runNack } from '../../../src/queue/scripts/scripts.js';
import { parseRecord } from '../../../src/queue/record.js';
import { createQueue, type Queue } from '../../../src/queue/producer/queue.js';
import type { Job } from '../../../src/queue/types.js';
import { dropQueue, redisClient, sleep, uniqueQueueName, waitFor } from '../../helpers/redis.js';

const TYPES = { t: {}, fail: { maxAttempts: 1 } };
let redis: RedisClient;
const names: string[] = [];
const queueOf = (name: string, shards: number): Queue => createQueue(redis, { name, types: TYPES, shards });

beforeAll(() => {
  redis = redisClient('reshard-test');
});
afterAll(async () => {
  for (const name of names) await dropQueue(redis, name);
  redis.disconnect();
});

type Running = { worker: Worker; redis: RedisClient };

async function startWorker(name: string, delivered: Map<string, number>, started: Map<string, number>): Promise<Running> {
  const wr = redisClient('reshard-worker');
  const handler = async (job: Job) => {
    delivered.set(job.id, (delivered.get(job.id) ?? 0) + 1);
    started.set(job.id, Date.now());
    await sleep(2);
  };
  const failing = async () => {
    throw new Error('always fails');
  };
  // Its own Queue: its own view of the layout, as another process has.
  const worker = createWorker({
    queue: queueOf(name, 1),
    redis: wr,
    handlers: { t: handler, fail: failing },
    concurrency: 20,
    leaseMs: 5_000,
    idleRecheckMs: 1_000,
  });
  await worker.start();
  return { worker, redis: wr };
}

describe.each([
  { way: 'by the default way', copy: undefined },
  { way: 'by copy, remove and settle', copy: true },
])('reshard under load, $way', ({ copy }) => {
  it('moves 1 -> 4 -> 2 while jobs are scheduled, cancelled, moved and run: each runs once, none is lost', async () => {
    const name = uniqueQueueName('reshard');
    names.push(name);
    const producer = queueOf(name, 1);
    await checkQueueLayout(redis, [producer]); // records the count, as a start does
    const delivered = new Map<string, number>();
    const started = new Map<string, number>();
    const workers = [await startWorker(name, delivered, started), await startWorker(name, delivered, started)];

    // Dead before the move: they must keep their death in their new shard.
    const dead = Array.from({ length: 30 }, (_, i) => `dead-${i}`);
    await producer.scheduleMany(dead.map((id) => ({ id, type: 'fail', delayMs: 0 })));
    expect(await waitFor(async () => (await producer.stats()).dead === dead.length, 20_000, 50)).toBe(true);
    // Pending through the whole move, due after it.
    const late = Array.from({ length: 300 }, (_, i) => `late-${i}`);
    await producer.scheduleMany(late.map((id) => ({ id, type: 't', delayMs: 25_000 })));

    const scheduled = new Set<string>(late);
    const cancelledPending = new Set<string>();
    const movedEarlier = new Map<string, number>(); // id -> the earliest it may run (ms)
    const missed: string[] = []; // lookups by id that did not find a job that was there
    let n = 0;
    let producing = true;
    const produce = (async () => {
      while (producing) {
        const batch = Array.from({ length: 10 }, () => `j-${n++}`);
        await producer.scheduleMany(batch.map((id, i) => ({ id, type: 't', delayMs: (i * 137) % 1_500 })));
        for (const id of batch) scheduled.add(id);
        // Every third batch: cancel a job just scheduled and a late one (in its
        // old shard until the mover comes), and move another late one forward.
        if (n % 30 === 0) {
          for (const victim of [batch[9] as string, late[late.length - 1 - ((n / 30) % 100)] as string]) {
            const c = await producer.cancel(victim);
            if (c.state === 'pending') cancelledPending.add(victim);
            // A late job is pending (due long after) until cancelled: wherever it
            // is during the move, a cancel finds it.
            else if (victim.startsWith('late-') && !cancelledPending.has(victim)) missed.push(`cancel ${victim}: ${c.state}`);
          }
          const mover = late[(n / 30) % 100] as string;
          if (!movedEarlier.has(mover)) {
            const r = await producer.reschedule(mover, { delayMs: 300 });
            // Its due time on the Redis clock (this host's): not run before it.
            if (r.status === 'updated') movedEarlier.set(mover, r.dueAt - 5);
            else missed.push(`reschedule ${mover}: ${r.status}`);
          }
        }
        await sleep(25);
      }
    })();

    await sleep(500);
    const up = await reshard(redis, { prefix: 'dq', name }, 4, { copy });
    expect(up).toMatchObject({ from: 1, to: 4 });
    expect(up.moved).toBeGreaterThan(0);
    expect(await redis.get(shardCountKey('dq', name))).toBe('4');
    const down = await reshard(redis, { prefix: 'dq', name }, 2, { copy });
    expect(down).toMatchObject({ from: 4, to: 2 });
    expect(await redis.get(shardCountKey('dq', name))).toBe('2');
    expect(await redis.hgetall(reshardKey('dq', name))).toMatchObject({ from: '4', to: '2', phase: 'done' });
    await sleep(500);
    producing = false;
    await produce;

    // Bring the late jobs forward so the test need not wait for them.
    for (const id of late) if (!movedEarlier.has(id) && !cancelledPending.has(id)) await producer.reschedule(id, { delayMs: 0 });
    const expected = [...scheduled].filter((id) => !cancelledPending.has(id));
    const allRan = await waitFor(() => expected.every((id) => delivered.has(id)), 60_000, 100);
    await sleep(1_500); // room for a second delivery to show up
    await Promise.all(workers.map(async (w) => (await w.worker.stop(), w.redis.disconnect())));

    expect(allRan, `${expected.filter((id) => !delivered.has(id)).length} of ${expected.length} never ran`).toBe(true);
    expect(missed).toEqual([]);
    expect([...delivered].filter(([, c]) => c > 1)).toEqual([]);
    expect([...cancelledPending].filter((id) => delivered.has(id))).toEqual([]);
    expect(cancelledPending.size).toBeGreaterThan(0);
    for (const [id, earliest] of movedEarlier) expect(started.get(id) ?? 0).toBeGreaterThanOrEqual(earliest);

    const stats = await producer.stats();
    expect(stats).toMatchObject({ pending: 0, inFlight: 0, dead: dead.length });
    for (const id of dead) {
      expect(await producer.get(id)).toMatchObject({ state: 'dead', lastError: expect.stringContaining('always fails') });
      expect(await redis.zscore(shardKeys('dq', name, shardOf(id, 2)).dead, id)).not.toBeNull();
    }
    // The shards the count dropped hold nothing.
    for (const s of [2, 3]) {
      const k = shardKeys('dq', name, s);
      expect(await redis.hlen(k.jobs)).toBe(0);
      expect(Number((await redis.hget(k.records, 'n')) ?? 0)).toBe(0);
      expect(await redis.zcard(k.due)).toBe(0);
      expect(await redis.zcard(k.inflight)).toBe(0);
      expect(await redis.zcard(k.dead)).toBe(0);
    }
  }, 180_000);
});

describe('the start-up check after a reshard', () => {
  it('still refuses a count changed in the configuration alone', async () => {
    const name = names[0] as string;
    expect(await redis.get(shardCountKey('dq', name))).toBe('2');
    // Stored 2, set by a reshard from 4: a process still configured with 4 (or
    // already with 2) starts; any other count is refused.
    await checkQueueLayout(redis, [queueOf(name, 2)]);
    await checkQueueLayout(redis, [queueOf(name, 4)]);
    const err = await checkQueueLayout(redis, [queueOf(name, 3)]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueueLayoutError);
    expect((err as Error).message).toContain(`${name} (written with 2, configured 3)`);
    expect(await redis.get(shardCountKey('dq', name))).toBe('2');
  });
});

// Interleavings around the switch of phases, made by hand at the points a
// mover (producer/reshard.ts) reaches them, with two Queues as two processes.
describe('the switch to move, with processes a refresh behind', () => {
  const P = 'dq';
  /** An id whose shard is `want` under `to` shards (0 under 1). */
  const idFor = (to: number, want: number, tag: string) => {
    for (let i = 0; ; i++) if (shardOf(`${tag}-${i}`, to) === want) return `${tag}-${i}`;
  };
  const fresh = async (count: number) => {
    const name = uniqueQueueName('reshard-switch');
    names.push(name);
    await redis.set(shardCountKey(P, name), String(count));
    return name;
  };
  /** What the mover does entering 'move': every shard fenced with the next epoch, then the record. */
  const enterMove = async (name: string, from: number, to: number) => {
    for (let s = 0; s < Math.max(from, to); s++) await runLayoutFence(redis, shardKeys(P, name, s), 1);
    await redis.hset(reshardKey(P, name), { from, to, phase: 'move', epoch: 1 });
  };
  const places = async (name: string, id: string, n: number) => {
    const out: (string | null)[] = [];
    for (let s = 0; s < n; s++) out.push((await runInspect(redis, shardKeys(P, name, s), id)).record === null ? null : `shard ${s}`);
    return out.filter((x) => x !== null);
  };

  it('a process still writing by the old count is fenced off: one copy, the later write kept', async () => {
    const name = await fresh(1);
    const a = queueOf(name, 1);
    const b = queueOf(name, 1);
    await redis.hset(reshardKey(P, name), { from: 1, to: 2, phase: 'poll' });
    await a.layout.fresh(true);
    await b.layout.fresh(true);
    await enterMove(name, 1, 2);
    await a.layout.fresh(true); // a read 'move'; b's 'poll' is under a second old
    expect(b.layout.current.phase).toBe('poll');
    const id = idFor(2, 1, 'nx');
    const ra = await a.schedule({ id, type: 't', delayMs: 0, mode: 'nx' });
    const rb = await b.schedule({ id, type: 't', delayMs: 0, mode: 'nx' });
    expect([ra.status, rb.status]).toEqual(['created', 'exists']);
    expect(await places(name, id, 2)).toEqual(['shard 1']);
    expect((await runClaim(redis, shardKeys(P, name, 0), 10, 30_000, 0)).jobs).toEqual([]);

    // Upserts: b's, the later, is kept, in the new shard only.
    const up = idFor(2, 1, 'up');
    const c = queueOf(name, 1);
    await redis.hset(reshardKey(P, name), { phase: 'poll', epoch: 0 }); // c reads 'poll', as b did
    await c.layout.fresh(true);
    await redis.hset(reshardKey(P, name), { phase: 'move', epoch: 1 });
    await a.schedule({ id: up, type: 't', delayMs: 60_000, payload: { v: 1 } });
    await c.schedule({ id: up, type: 't', delayMs: 60_000, payload: { v: 2 } });
    expect(await places(name, up, 2)).toEqual(['shard 1']);
    expect((await a.get(up))?.payload).toEqual({ v: 2 });
    // A cancel by the old count finds it too.
    const d = queueOf(name, 1);
    await redis.hset(reshardKey(P, name), { phase: 'poll', epoch: 0 });
    await d.layout.fresh(true);
    await redis.hset(reshardKey(P, name), { phase: 'move', epoch: 1 });
    expect(await d.cancel(up)).toEqual({ cancelled: true, state: 'pending' });
    expect(await places(name, up, 2)).toEqual([]);
  });

  it('a bulk naming one id twice keeps their order while jobs move', async () => {
    const name = await fresh(1);
    const q = queueOf(name, 1);
    const id = idFor(2, 1, 'twice');
    await q.schedule({ id, type: 't', delayMs: 30_000, payload: { v: 0 } });
    await enterMove(name, 1, 2);
    await q.layout.fresh(true);
    const r = await q.scheduleMany([
      { id, type: 't', delayMs: 10_000, payload: { v: 1 } },
      { id, type: 't', delayMs: 600_000, payload: { v: 2 }, mode: 'xx' },
    ]);
    expect(r.map((x) => x.status)).toEqual(['updated', 'updated']);
    const got = await q.get(id);
    expect(got?.payload).toEqual({ v: 2 });
    expect((got?.dueAt ?? 0) - Date.now()).toBeGreaterThan(500_000);
    expect(await places(name, id, 2)).toEqual(['shard 1']);
  });

  it('a resume sent by the old count alone still reaches the new shards', async () => {
    const name = await fresh(1);
    const admin = queueOf(name, 1);
    const producer = queueOf(name, 1);
    await admin.pause('t');
    const keys = [shardKeys(P, name, 0), shardKeys(P, name, 1)];
    await copyPauseState(redis, keys, 1, 2);
    await redis.hset(reshardKey(P, name), { from: 1, to: 2, phase: 'poll' });
    // A resume reads the layout afresh: it reaches the new shard.
    expect(await admin.resume('t')).toMatchObject({ changed: true });
    expect(await redis.hlen(keys[1]!.paused)).toBe(0);
    // One that acted on the old count alone (only shard 0 resumed) is repaired.
    await runPause(redis, keys[1]!, 't');
    expect(await alignPauseState(redis, keys, 2)).toBe(1);
    await enterMove(name, 1, 2);
    await producer.layout.fresh(true);
    const id = idFor(2, 1, 'resumed');
    await producer.schedule({ id, type: 't', delayMs: 0 });
    const c = await runClaim(redis, keys[1]!, 10, 30_000, 0);
    expect(c.jobs.map((j) => j.id)).toEqual([id]);
    expect(c.parked).toBe(0);
    expect(await admin.pauseState()).toEqual({ queue: false, types: [], partial: [] });
  });

  it('a mover that lost its lock writes nothing: renew, release and each step are checked against its token', async () => {
    const name = await fresh(2);
    const lock = { shardCount: shardCountKey(P, name), reshard: reshardKey(P, name), reshardLock: reshardLockKey(P, name) };
    await redis.set(lock.reshardLock, 'newer', 'PX', 30_000);
    await redis.hset(lock.reshard, { from: 2, to: 4, phase: 'move', epoch: 1 });
    expect(await runReshardLock(redis, lock, 'stale', 30_000)).toBe(false);
    expect(await runReshardLock(redis, lock, 'stale', 0)).toBe(false);
    expect(await redis.get(lock.reshardLock)).toBe('newer');
    expect(await runReshardStep(redis, lock, 'stale', { expect: 'move', from: 2, to: 4, phase: 'done', epoch: 1 })).toBe(0);
    expect(await redis.get(lock.shardCount)).toBe('2');
    // The holder, from the wrong phase: refused too.
    expect(await runReshardStep(redis, lock, 'newer', { expect: 'poll', from: 2, to: 4, phase: 'move', epoch: 2 })).toBe(-1);
    expect(await runReshardStep(redis, lock, 'newer', { expect: 'move', from: 2, to: 4, phase: 'done', epoch: 1 })).toBe(1);
    expect(await redis.get(lock.shardCount)).toBe('4');
    expect(await runReshardLock(redis, lock, 'newer', 0)).toBe(true);
    expect(await redis.exists(lock.reshardLock)).toBe(0);
  });

  it('after a grow with the configured count left as it was, dead-letter admin and the pause state reach every shard', async () => {
    const name = await fresh(2); // stored 2, as a reshard 1 -> 2 leaves it
    const grown = queueOf(name, 2);
    const id = idFor(2, 1, 'dead');
    await grown.schedule({ id, type: 't', delayMs: 0 });
    const k1 = shardKeys(P, name, 1);
    const [job] = (await runClaim(redis, k1, 10, 30_000, 0)).jobs;
    await runNack(redis, k1, id, parseRecord(job!.record).token, 'dead', 0, 'boom');
    await runPause(redis, shardKeys(P, name, 0), 't');
    const q = queueOf(name, 1); // configured 1, never read the layout yet
    expect((await q.pauseState()).partial).toEqual(['t']);
    expect((await q.listDead(null)).jobs.map((j) => j.id)).toEqual([id]);
    expect(await q.redriveAll()).toBe(1);
  });

  it("ungroup (a rollback's first step) keeps the shard's layout epoch: the fence still refuses an older layout", async () => {
    const name = await fresh(1);
    const grouped = createQueue(redis, { name, types: TYPES, shards: 1, recordGroups: true });
    await grouped.scheduleMany(Array.from({ length: 100 }, (_, i) => ({ id: `e${i}`, type: 't', delayMs: 3_600_000 })));
    const k = shardKeys(P, name, 0);
    expect(await runLayoutFence(redis, k, 3)).toBe(3);
    expect(await queueOf(name, 1).ungroup()).toBe(100);
    expect(await redis.hgetall(k.records)).toEqual({ e: '3' });
    expect(await runLayoutFence(redis, k, 2)).toBe(3);
  });

  it('a shard added while the worker stops is not polled after the stop', async () => {
    const name = await fresh(1);
    await redis.hset(reshardKey(P, name), { from: 1, to: 2, phase: 'poll' });
    const wr = redisClient('reshard-stop');
    const worker = createWorker({
      queue: queueOf(name, 1),
      redis: wr,
      handlers: { t: async () => {}, fail: async () => {} },
      leaseMs: 5_000,
      idleRecheckMs: 200,
    });
    await worker.start(); // reads the layout and adds shard 1 in the background
    await worker.stop();
    const id = idFor(2, 1, 'after-stop');
    await runSchedule(
      redis,
      shardKeys(P, name, 1),
      { mode: 'upsert', timeKind: 'in', type: 't', maxAttempts: undefined, priority: undefined },
      [{ id, time: 0, payload: '{}' }],
      false,
      0,
    );
    await sleep(600);
    expect((await runInspect(redis, shardKeys(P, name, 1), id)).leaseUntil).toBeNull();
    wr.disconnect();
  });
});
