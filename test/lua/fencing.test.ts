// Fencing at the script level: a token from an earlier delivery never matches a
// later one, even when the same job id was cancelled and scheduled again.
import type { RedisClient } from '../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueue } from '../../src/queue/producer/queue.js';
import { runAck, runClaim, runExtend, runNack, runRelease } from '../../src/queue/scripts/scripts.js';
import { dropQueue, redisClient, uniqueQueueName } from '../helpers/redis.js';
import { setRecord } from '../helpers/records.js';

let redis: RedisClient;
const names: string[] = [];
beforeAll(() => {
  redis = redisClient('fencing-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n);
  redis.disconnect();
});

function queue() {
  const name = uniqueQueueName('fence');
  names.push(name);
  return createQueue(redis, { name, types: { t: {} } });
}

async function claimOne(q: ReturnType<typeof queue>) {
  const r = await runClaim(redis, q.keys[0]!, 1, 60_000, 10);
  expect(r.jobs).toHaveLength(1);
  return Number(r.jobs[0]!.record.split(',')[0]);
}

describe('fencing tokens', () => {
  it('an old delivery cannot touch a job that was cancelled and scheduled again under the same id', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await q.schedule({ id: 'x', type: 't', delayMs: 0 });
    const oldToken = await claimOne(q);
    await q.cancel('x');
    await q.schedule({ id: 'x', type: 't', delayMs: 0 });
    const newToken = await claimOne(q);
    expect(newToken).not.toBe(oldToken);

    expect(await runAck(redis, k, [{ id: 'x', token: oldToken }])).toEqual({ acked: 0, stale: ['x'] });
    expect((await runNack(redis, k, 'x', oldToken, 'dead', 0, 'late')).code).toBe(0);
    expect(await runExtend(redis, k, 'x', oldToken, 1_000)).toBeNull();
    expect(await runRelease(redis, k, [{ id: 'x', token: oldToken }])).toBe(0);
    expect((await q.get('x'))?.state).toBe('in_flight');
    expect(await runAck(redis, k, [{ id: 'x', token: newToken }])).toEqual({ acked: 1, stale: [] });
    expect(await q.get('x')).toBeNull();
  });

  it('a reschedule while in flight fences the running delivery', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await q.schedule({ id: 'y', type: 't', delayMs: 0 });
    const token = await claimOne(q);
    await q.schedule({ id: 'y', type: 't', delayMs: 60_000 }); // moved while running
    expect(await runAck(redis, k, [{ id: 'y', token }])).toEqual({ acked: 0, stale: ['y'] });
    expect(await q.get('y')).toMatchObject({ state: 'pending', attempts: 0 });
  });

  it('token 0, the value of every job not in flight, is never accepted', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await q.schedule({ id: 'z', type: 't', delayMs: 0 });
    await claimOne(q);
    expect(await runAck(redis, k, [{ id: 'z', token: 0 }])).toEqual({ acked: 0, stale: ['z'] });
  });

  it('a corrupt record is parked in the dead set without failing the batch', async () => {
    const q = queue();
    const k = q.keys[0]!;
    await q.scheduleMany([
      { id: 'good1', type: 't', delayMs: 0 },
      { id: 'bad', type: 't', delayMs: 0 },
      { id: 'good2', type: 't', delayMs: 0 },
    ]);
    await setRecord(redis, k, 'bad', 'garbage');
    const r = await runClaim(redis, k, 10, 60_000, 10);
    expect(r.jobs.map((j) => j.id).sort()).toEqual(['good1', 'good2']);
    expect(await q.get('good1')).toMatchObject({ state: 'in_flight' });
    expect(await redis.zscore(k.dead, 'bad')).not.toBeNull();
    expect(await redis.hget(k.errors, 'bad')).toBe('corrupt job record');
  });
});
