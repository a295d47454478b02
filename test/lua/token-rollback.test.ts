// Fencing tokens stay unique when Redis loses its latest writes (a crash
// between AOF fsyncs, a failover to a replica that lagged): a claim made again
// after the rollback hands out tokens no delivery of the lost window holds, so
// that stale delivery can neither dead-letter nor ack the new one (review
// 2026-11-23, F8). The rollback is simulated at the script level: the shard's
// keys are DUMPed before a claim and RESTOREd after it.
import type { RedisClient } from '../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShardKeys } from '../../src/queue/keys.js';
import { createQueue } from '../../src/queue/producer/queue.js';
import { NackCode, runAck, runClaim, runExtend, runNack } from '../../src/queue/scripts/scripts.js';
import { dropQueue, redisClient, redisNowMs, uniqueQueueName, waitFor } from '../helpers/redis.js';
import { recordGroupKeys } from '../helpers/records.js';

let redis: RedisClient;
const names: string[] = [];
beforeAll(() => {
  redis = redisClient('token-rollback-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n);
  redis.disconnect();
});

function queue() {
  const name = uniqueQueueName('rollback');
  names.push(name);
  return createQueue(redis, { name, types: { t: {} } });
}

/** Every key of the shard that exists or may: the fixed ones, the record groups and the due buckets the index lists (one hash tag, one slot). */
async function shardKeyNames(k: ShardKeys): Promise<string[]> {
  const buckets = await redis.zrange(k.due, 0, -1);
  const groups = await recordGroupKeys(redis, k);
  return [k.due, k.seq, k.inflight, k.jobs, k.records, ...groups, k.dead, k.errors, ...buckets.map((b) => k.dueBuckets + b)];
}

type Snapshot = (readonly [string, Buffer | null])[];

/** What a replica or the fsynced AOF holds: the shard as it is now. */
async function snapshot(k: ShardKeys): Promise<Snapshot> {
  return Promise.all((await shardKeyNames(k)).map(async (key) => [key, await redis.dumpBuffer(key)] as const));
}

/** Redis comes back from the snapshot: everything written since is lost. */
async function rollBack(k: ShardKeys, snap: Snapshot): Promise<void> {
  const keys = new Set([...(await shardKeyNames(k)), ...snap.map(([key]) => key)]);
  await redis.del(...keys);
  for (const [key, dump] of snap) if (dump) await redis.restore(key, 0, dump);
}

const tokenOf = (record: string) => Number(record.split(',')[0]);

/** Waits until the Redis clock is past `ms`, as it is by the time a failover or restart is over. */
async function clockPast(ms: number): Promise<void> {
  expect(await waitFor(async () => (await redisNowMs(redis)) > ms, 1_000, 1)).toBe(true);
}

describe('fencing tokens across a Redis rollback', () => {
  it('a claim repeated after the rollback gets a new token; the lost delivery can neither dead-letter nor ack it', async () => {
    const q = queue();
    const k = q.keys[0]!;
    // Earlier traffic, so the shard's seq is past its start.
    await q.schedule({ id: 'order:1:expire', type: 't', delayMs: 0 });
    const first = await runClaim(redis, k, 10, 30_000, 100);
    expect((await runAck(redis, k, [{ id: 'order:1:expire', token: tokenOf(first.jobs[0]!.record) }])).acked).toBe(1);
    await q.schedule({ id: 'X', type: 't', delayMs: 0 });

    const snap = await snapshot(k);
    const a = await runClaim(redis, k, 10, 30_000, 100); // worker A's claim: the write Redis loses
    expect(a.jobs.map((j) => j.id)).toEqual(['X']);
    const tokenA = tokenOf(a.jobs[0]!.record);
    await rollBack(k, snap);
    expect(await q.get('X')).toMatchObject({ state: 'pending', attempts: 0 }); // the claim is gone
    await clockPast(a.now);

    const b = await runClaim(redis, k, 10, 30_000, 100); // worker B claims X again
    expect(b.jobs.map((j) => j.id)).toEqual(['X']);
    const tokenB = tokenOf(b.jobs[0]!.record);
    expect(tokenB).not.toBe(tokenA);

    // A, still running from before the rollback, fails on its last attempt: fenced off.
    expect((await runNack(redis, k, 'X', tokenA, 'dead', 0, 'A failed')).code).toBe(NackCode.STALE);
    expect(await runAck(redis, k, [{ id: 'X', token: tokenA }])).toEqual({ acked: 0, stale: ['X'] });
    expect(await runExtend(redis, k, 'X', tokenA, 30_000)).toBeNull();
    expect(await q.get('X')).toMatchObject({ state: 'in_flight', attempts: 1, lastError: null });
    expect(await redis.zscore(k.dead, 'X')).toBeNull();

    // B's delivery is intact: its ack completes the job.
    expect(await runAck(redis, k, [{ id: 'X', token: tokenB }])).toEqual({ acked: 1, stale: [] });
    expect(await q.get('X')).toBeNull();
  });

  it('no token of a batch claimed again after the rollback repeats one of the lost batch', async () => {
    const q = queue();
    const k = q.keys[0]!;
    const ids = Array.from({ length: 50 }, (_, i) => `j${i}`);
    await q.scheduleMany(ids.map((id) => ({ id, type: 't', delayMs: 0 })));
    const snap = await snapshot(k);
    const a = await runClaim(redis, k, ids.length, 30_000, 100);
    expect(a.jobs).toHaveLength(ids.length);
    await rollBack(k, snap);
    await clockPast(a.now);

    const b = await runClaim(redis, k, ids.length, 30_000, 100);
    expect(b.jobs).toHaveLength(ids.length);
    const lost = new Set(a.jobs.map((j) => tokenOf(j.record)));
    expect(b.jobs.filter((j) => lost.has(tokenOf(j.record))).map((j) => j.id)).toEqual([]);
    // Every lost delivery is fenced off, every new one holds its job.
    for (const j of a.jobs) expect((await runNack(redis, k, j.id, tokenOf(j.record), 'dead', 0, 'lost')).code).toBe(NackCode.STALE);
    const acked = await runAck(redis, k, b.jobs.map((j) => ({ id: j.id, token: tokenOf(j.record) })));
    expect(acked).toEqual({ acked: ids.length, stale: [] });
    expect(await q.stats()).toMatchObject({ pending: 0, inFlight: 0, dead: 0 });
  });
});

describe('fencing tokens at the end of exact numbers', () => {
  // Found by an adversarial review (2026-11-23): past 2^53 (a clock set
  // centuries ahead once) every claim handed out the same token and fencing
  // was gone for good; a claim now refuses loudly instead.
  it('refuses to hand out a token past 2^53 instead of repeating one', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await q.schedule({ id: 'x', type: 't', delayMs: 0 });
    await redis.set(k.seq, '9007199254740991'); // 2^53 - 1: the next token is not exact
    await expect(runClaim(redis, k, 10, 60_000, 10)).rejects.toThrow(/fencing tokens exhausted/);
    expect(await q.get('x')).toMatchObject({ state: 'pending' }); // nothing changed
  });
});
