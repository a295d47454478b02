// The mover's way on a Redis Cluster (copy, remove, settle:
// producer/reshard-copy.ts) when it is interrupted between its steps, staged
// by hand at those points: a mover that stops, a second mover after a lock
// expiry, a dead job read and written between the steps, a job changed in its
// old shard between them, a master that no longer has the copy after the
// wait (a failover), and a replica that has not acknowledged a copy. Each
// ends with the job in exactly one shard, run at most once, and a reshard
// run again finishing the change.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { RedisClient } from '../../../src/core/redis.js';
import { movedOutKey, movingCopiesKey, reshardGenKey, reshardKey, shardCountKey, shardKeys, shardOf } from '../../../src/queue/keys.js';
import { reshard } from '../../../src/queue/producer/reshard.js';
import { moveByCopy, settleLeftCopies, type CopyMover } from '../../../src/queue/producer/reshard-copy.js';
import { parseRecord } from '../../../src/queue/record.js';
import { runInspect } from '../../../src/queue/scripts/admin-scripts.js';
import { type CopiedJob, StaleMoverError, runLayoutFence, runMoveFence, runMoveIn, runMoveOut } from '../../../src/queue/scripts/move-scripts.js';
import { runCancel, runSchedule } from '../../../src/queue/scripts/schedule-scripts.js';
import { createQueue } from '../../../src/queue/producer/queue.js';
import { runAck, runClaim, runNack } from '../../../src/queue/scripts/scripts.js';
import { startPrivateRedis, type PrivateRedis } from '../../helpers/redis-server.js';
import { dropQueue, redisClient, uniqueQueueName, waitFor } from '../../helpers/redis.js';

const P = 'dq';
let redis: RedisClient;
const names: string[] = [];

beforeAll(() => {
  redis = redisClient('reshard-copy-test');
});
afterAll(async () => {
  for (const name of names) await dropQueue(redis, name);
  redis.disconnect();
});

/** An id of shard 0 under one shard whose shard under two is 1: it moves in a change 1 -> 2. */
const movingId = (tag: string) => {
  for (let i = 0; ; i++) if (shardOf(`${tag}-${i}`, 2) === 1) return `${tag}-${i}`;
};

/** A queue of one shard in phase 'move' of a change to two, as a mover leaves it once producers write by the new count. */
async function queueMidChange(r: RedisClient = redis) {
  const name = uniqueQueueName('reshard-copy');
  names.push(name);
  const k = [shardKeys(P, name, 0), shardKeys(P, name, 1)] as const;
  await r.set(shardCountKey(P, name), '1');
  for (const s of k) await runLayoutFence(r, s, 1);
  await r.hset(reshardKey(P, name), { from: 1, to: 2, phase: 'move', epoch: 1 });
  return { name, k };
}

async function schedule(r: RedisClient, k: ReturnType<typeof shardKeys>, id: string, delayMs = 0, type = 't', mode: 'upsert' | 'xx' = 'upsert') {
  await runSchedule(r, k, { mode, timeKind: 'in', type, maxAttempts: 1, priority: undefined }, [{ id, time: delayMs, payload: '{}' }], false, 1);
}

/** The job as a mover reads it in its old shard before it copies it (reshard-copy.ts, moveByCopy). */
async function readForCopy(r: RedisClient, k: ReturnType<typeof shardKeys>, id: string): Promise<CopiedJob> {
  const seen = await runInspect(r, k, id);
  return { id, record: seen.record!, diedAt: seen.diedAt ?? 0, lastError: seen.lastError };
}

/** A mover with the queue's next generation that fenced both shards, as reshard.ts's takeShardsOver makes one. */
async function moverOf(r: RedisClient, name: string, k: readonly ReturnType<typeof shardKeys>[], replicaWaitMs = 2_000): Promise<CopyMover> {
  const gen = await r.incr(reshardGenKey(P, name));
  for (const s of k) expect(await runMoveFence(r, s, gen)).toBe(gen);
  return { redis: r, gen, recordGroups: false, replicaWaitMs, replicas: new Map() };
}

/**
 * The client, with `before` run ahead of the named command (a script by its
 * registry name, or a Redis command) each time `when(n)` says so for its
 * n-th call: a write of another process landing between the mover's steps.
 */
function interposed(r: RedisClient, command: string, when: (n: number) => boolean, before: () => Promise<unknown>): RedisClient {
  let n = 0;
  return new Proxy(r, {
    get(target, prop) {
      const v = Reflect.get(target, prop) as unknown;
      if (typeof v !== 'function') return v;
      if (prop !== command) return v.bind(target);
      return async (...args: unknown[]) => {
        if (when(++n)) await before();
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

const where = async (r: RedisClient, k: readonly ReturnType<typeof shardKeys>[], id: string) => {
  const out: string[] = [];
  for (let s = 0; s < k.length; s++) {
    const i = await runInspect(r, k[s]!, id);
    if (i.record !== null) out.push(`shard ${s}: ${i.leaseUntil !== null ? 'in flight' : i.diedAt !== null ? 'dead' : 'pending'}`);
  }
  return out;
};

describe('a change by copy interrupted between its steps', () => {
  it('a stopped mover left a copy of a job that then ran in its old shard: the copy is taken back, the job does not run again', async () => {
    const { name, k } = await queueMidChange();
    const id = movingId('ran');
    await schedule(redis, k[0], id);
    const a = await moverOf(redis, name, k);
    const jobs = [await readForCopy(redis, k[0], id)];
    expect(await runMoveIn(redis, k[1], a.gen, jobs, false)).toEqual([true]);
    // A worker claims it before the mover's remove, which keeps it (in flight); the mover stops there.
    const [job] = (await runClaim(redis, k[0], 10, 30_000, 0)).jobs;
    expect(job?.id).toBe(id);
    expect(await runMoveOut(redis, k[0], a.gen, jobs)).toEqual([false]);
    expect((await runAck(redis, k[0], [{ id, token: parseRecord(job!.record).token }])).acked).toBe(1);
    expect(await where(redis, k, id)).toEqual(['shard 1: pending']); // the unsettled copy, not claimable

    const r = await reshard(redis, { prefix: P, name }, 2, { copy: true, waitMs: 50 });
    expect(r).toMatchObject({ from: 1, to: 2 });
    expect(await where(redis, k, id)).toEqual([]);
    expect((await runClaim(redis, k[1], 10, 30_000, 0)).jobs).toEqual([]);
    expect(await redis.zcard(movingCopiesKey(k[1]))).toBe(0);
  });

  it('a stopped mover removed the job from its old shard: its copy is filed and runs once', async () => {
    const { name, k } = await queueMidChange();
    const id = movingId('removed');
    await schedule(redis, k[0], id);
    const a = await moverOf(redis, name, k);
    const jobs = [await readForCopy(redis, k[0], id)];
    await runMoveIn(redis, k[1], a.gen, jobs, false);
    expect(await runMoveOut(redis, k[0], a.gen, jobs)).toEqual([true]);
    expect(await redis.zscore(movedOutKey(k[0]), id)).toBe('1'); // the proof, left in the same step

    await reshard(redis, { prefix: P, name }, 2, { copy: true, waitMs: 50 });
    expect(await where(redis, k, id)).toEqual(['shard 1: pending']);
    expect((await runClaim(redis, k[1], 10, 30_000, 0)).jobs.map((j) => j.id)).toEqual([id]);
    // The change is done: no proof and no copy left behind.
    expect(await redis.exists(movedOutKey(k[0]))).toBe(0);
    expect(await redis.zcard(movingCopiesKey(k[1]))).toBe(0);
  });

  it('a mover that stalled past its lock changes nothing once a newer one fenced the shards: the job is not lost', async () => {
    const { name, k } = await queueMidChange();
    const id = movingId('stalled');
    await schedule(redis, k[0], id, 60_000);
    const a = await moverOf(redis, name, k);
    const jobs = [await readForCopy(redis, k[0], id)];
    await runMoveIn(redis, k[1], a.gen, jobs, false);
    // a stalls; b fences every shard and settles a's copy: the old shard still has the job, so it is taken back.
    const b = await moverOf(redis, name, k);
    expect(await settleLeftCopies(b, k, 1, 2)).toBe(1);
    expect(await where(redis, k, id)).toEqual(['shard 0: pending']);
    // a comes back: each of its steps is refused, in either shard.
    await expect(runMoveOut(redis, k[0], a.gen, jobs)).rejects.toBeInstanceOf(StaleMoverError);
    await expect(runMoveIn(redis, k[1], a.gen, jobs, false)).rejects.toBeInstanceOf(StaleMoverError);
    await expect(moveByCopy(a, k[0], k[1], [id])).rejects.toBeInstanceOf(StaleMoverError);
    expect(await where(redis, k, id)).toEqual(['shard 0: pending']);
    // A fence never goes back to an older generation.
    expect(await runMoveFence(redis, k[0], 1)).toBe(2);

    await reshard(redis, { prefix: P, name }, 2, { copy: true, waitMs: 50 });
    expect(await where(redis, k, id)).toEqual(['shard 1: pending']);
  });

  it('a dead job copied and removed but not yet settled reads dead, with its time of death', async () => {
    const { name, k } = await queueMidChange();
    const id = movingId('dead');
    await schedule(redis, k[0], id, 0, 'fail');
    const [job] = (await runClaim(redis, k[0], 10, 30_000, 0)).jobs;
    await runNack(redis, k[0], id, parseRecord(job!.record).token, 'dead', 0, 'boom');
    const seen = await readForCopy(redis, k[0], id);
    expect(seen.diedAt).toBeGreaterThan(0);
    const a = await moverOf(redis, name, k);
    const jobs = [seen];
    await runMoveIn(redis, k[1], a.gen, jobs, false);
    expect(await runMoveOut(redis, k[0], a.gen, jobs)).toEqual([true]);
    expect(await runInspect(redis, k[1], id)).toMatchObject({ diedAt: seen.diedAt, dueAt: null, lastError: 'boom' });

    await reshard(redis, { prefix: P, name }, 2, { copy: true, waitMs: 50 });
    expect(await redis.zscore(k[1].dead, id)).toBe(String(seen.diedAt));
  });
});

describe('a change by copy with writes between its steps', () => {
  it('a job changed in its old shard between the read and the remove is still to move: the change does not end before it moved', async () => {
    const { name, k } = await queueMidChange();
    const id = movingId('hot');
    await schedule(redis, k[0], id, 60_000);
    // In the first two passes a producer reschedules the job just before the mover's remove.
    const mover = interposed(
      redis,
      'dqMoveOut',
      (n) => n <= 2,
      () => schedule(redis, k[0], id, 120_000),
    );
    const r = await reshard(mover, { prefix: P, name }, 2, { copy: true, waitMs: 50 });
    expect(r.passes).toBeGreaterThan(3);
    expect(await where(redis, k, id)).toEqual(['shard 1: pending']);
    expect(((await runInspect(redis, k[1], id)).dueAt ?? 0) - Date.now()).toBeGreaterThan(100_000); // the later write
  });

  it('a job the new shard already has, changed in its old shard before the remove, is still to move: the change does not end with it in both', async () => {
    const { name, k } = await queueMidChange();
    const id = movingId('both');
    await schedule(redis, k[0], id, 60_000);
    // A producer's upsert by the new count; its cancel of the old copy never ran (it died between the two).
    await schedule(redis, k[1], id, 90_000);
    const mover = interposed(
      redis,
      'dqMoveOut',
      (n) => n <= 2,
      () => schedule(redis, k[0], id, 120_000, 't', 'xx'),
    );
    await reshard(mover, { prefix: P, name }, 2, { copy: true, waitMs: 50 });
    expect(await where(redis, k, id)).toEqual(['shard 1: pending']);
  });

  it('copies the master no longer has after the wait (a failover before it) are not relied on: the jobs stay in their old shard', async () => {
    const { name, k } = await queueMidChange();
    const ids = [movingId('lost-a'), movingId('lost-b')];
    for (const id of ids) await schedule(redis, k[0], id, 60_000);
    const m = await moverOf(redis, name, k);
    // The master that answers the read after the wait never had the copies.
    const lost = async () => {
      for (const id of ids) await redis.zrem(movingCopiesKey(k[1]), id);
      await redis.hdel(k[1].jobs, ...ids);
    };
    const r = await moveByCopy({ ...m, redis: interposed(redis, 'zmscore', (n) => n === 1, lost) }, k[0], k[1], ids);
    expect(r).toMatchObject({ moved: 0, kept: 2 });
    for (const id of ids) expect(await where(redis, k, id)).toEqual(['shard 0: pending']);
    expect(await redis.exists(movedOutKey(k[0]))).toBe(0);
    expect(await moveByCopy(m, k[0], k[1], ids)).toMatchObject({ moved: 2, kept: 0 });
  });

  it("a proof stays while its copy's settle is not on the master after the wait (a failover lost it); the pass's end files the copy on it", async () => {
    const { name, k } = await queueMidChange();
    const id = movingId('unsettled');
    await schedule(redis, k[0], id, 60_000);
    const m = await moverOf(redis, name, k);
    // The settle lost: the copy back among the unsettled ones, out of its due bucket.
    const lostSettle = async () => {
      await schedule(redis, k[1], id, 60_000);
      const rec = (await runInspect(redis, k[1], id)).record!;
      await runCancel(redis, k[1], id, 1);
      await redis.hset(k[1].jobs, id, rec);
      await redis.zadd(movingCopiesKey(k[1]), 0, id);
    };
    const r = await moveByCopy({ ...m, redis: interposed(redis, 'zmscore', (n) => n === 2, lostSettle) }, k[0], k[1], [id]);
    expect(r).toMatchObject({ moved: 1 });
    expect(await redis.zscore(movedOutKey(k[0]), id)).not.toBeNull();
    expect(await settleLeftCopies(m, k, 1, 2)).toBe(1);
    expect(await where(redis, k, id)).toEqual(['shard 1: pending']);
    expect((await runClaim(redis, k[1], 10, 30_000, 0)).jobs).toEqual([]); // due in a minute, filed in its bucket
  });

  it('a dead job copied and removed but not yet settled stays dead to a reschedule, an nx schedule and a cancel', async () => {
    const { name, k } = await queueMidChange();
    const ids = [movingId('dead-w0'), movingId('dead-w1')];
    for (const id of ids) {
      await schedule(redis, k[0], id, 0, 'fail');
      const [job] = (await runClaim(redis, k[0], 10, 30_000, 0)).jobs;
      await runNack(redis, k[0], id, parseRecord(job!.record).token, 'dead', 0, 'boom');
    }
    const a = await moverOf(redis, name, k);
    const jobs = await Promise.all(ids.map((id) => readForCopy(redis, k[0], id)));
    await runMoveIn(redis, k[1], a.gen, jobs, false);
    expect(await runMoveOut(redis, k[0], a.gen, jobs)).toEqual([true, true]);
    const q = createQueue(redis, { name, types: { t: {}, fail: {} }, shards: 1 });
    await q.layout.fresh(true);
    expect(q.layout.current.phase).toBe('move');
    expect(await q.reschedule(ids[0]!, { delayMs: 0 })).toMatchObject({ status: 'not_found' });
    expect((await q.scheduleMany([{ id: ids[0]!, type: 'fail', delayMs: 0, mode: 'nx' }]))[0]).toMatchObject({ status: 'dead' });
    expect(await q.cancel(ids[1]!)).toEqual({ cancelled: true, state: 'dead' });
    expect((await runClaim(redis, k[1], 10, 30_000, 0)).jobs).toEqual([]);

    await reshard(redis, { prefix: P, name }, 2, { copy: true, waitMs: 50 });
    expect(await where(redis, k, ids[0]!)).toEqual(['shard 1: dead']);
    expect(await where(redis, k, ids[1]!)).toEqual([]);
  });
});

describe('a change by copy on a master with a replica', () => {
  let master: PrivateRedis;
  let replica: PrivateRedis;
  let m: Redis;
  beforeAll(async () => {
    master = await startPrivateRedis();
    replica = await startPrivateRedis(['--replicaof', '127.0.0.1', String(master.port)]);
    m = new Redis(master.url);
    const r = new Redis(replica.url);
    expect(await waitFor(async () => /master_link_status:up/.test(await r.info('replication')), 20_000, 50)).toBe(true);
    r.disconnect();
    // The master lists a replica only once it has acknowledged (up to a second after its
    // own link is up): a mover asking before would wait for none, and the tests below
    // assume it waits for this one.
    expect(await waitFor(async () => (((await m.call('ROLE')) as unknown[][])[2]?.length ?? 0) > 0, 20_000, 50)).toBe(true);
  }, 60_000);
  afterAll(async () => {
    replica.resume();
    m.disconnect();
    await replica.stop();
    await master.stop();
  });

  it('copies no replica acknowledged in time are taken back, the jobs kept in their old shard; moved once it answers', async () => {
    const { name, k } = await queueMidChange(m);
    const ids = Array.from({ length: 5 }, (_, i) => movingId(`repl-${i}`));
    for (const id of ids) await schedule(m, k[0], id, 60_000);
    const mover = await moverOf(m, name, k, 300);

    replica.pause(); // a failover now would promote a replica without the copies
    const held = await moveByCopy(mover, k[0], k[1], ids);
    expect(held).toMatchObject({ moved: 0, unreplicated: ids.length });
    for (const id of ids) expect(await where(m, k, id)).toEqual(['shard 0: pending']);
    expect(await m.zcard(movingCopiesKey(k[1]))).toBe(0);

    replica.resume();
    const moved = await moveByCopy(mover, k[0], k[1], ids);
    expect(moved).toMatchObject({ moved: ids.length, unreplicated: 0 });
    for (const id of ids) expect(await where(m, k, id)).toEqual(['shard 1: pending']);
    // Once the settle is on the replica, the proofs go at once.
    expect(await m.exists(movedOutKey(k[0]))).toBe(0);
  });

  it('a replica whose link is down a moment (not listed by ROLE) is still waited for: a failover could promote it', async () => {
    const { name, k } = await queueMidChange(m);
    const ids = Array.from({ length: 4 }, (_, i) => movingId(`blip-${i}`));
    for (const id of ids) await schedule(m, k[0], id, 60_000);
    const mover = await moverOf(m, name, k, 300);
    expect(await moveByCopy(mover, k[0], k[1], ids.slice(0, 2))).toMatchObject({ moved: 2 }); // the replica seen
    replica.pause();
    await m.call('CLIENT', 'KILL', 'TYPE', 'replica');
    expect(
      await waitFor(
        async () => ((await m.call('ROLE')) as unknown[])[2] instanceof Array && (((await m.call('ROLE')) as unknown[][])[2]?.length ?? 0) === 0,
        5_000,
        20,
      ),
    ).toBe(true);
    expect(await moveByCopy(mover, k[0], k[1], ids.slice(2))).toMatchObject({ moved: 0, unreplicated: 2 });
    for (const id of ids.slice(2)) expect(await where(m, k, id)).toEqual(['shard 0: pending']);
    replica.resume();
    const r = new Redis(replica.url);
    expect(await waitFor(async () => /master_link_status:up/.test(await r.info('replication')), 20_000, 50)).toBe(true);
    r.disconnect();
    expect(await moveByCopy(mover, k[0], k[1], ids.slice(2))).toMatchObject({ moved: 2 });
  }, 60_000);
});
