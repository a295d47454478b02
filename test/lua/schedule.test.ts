// Scheduling, cancel, reschedule and lookup against the real Redis.
import type { RedisClient } from '../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueInputError } from '../../src/queue/errors.js';
import { createQueue } from '../../src/queue/producer/queue.js';
import { runClaim } from '../../src/queue/scripts/scripts.js';
import { pendingJobs } from '../helpers/due-index.js';
import { dropQueue, redisClient, redisNowMs, uniqueQueueName } from '../helpers/redis.js';

let redis: RedisClient;
const names: string[] = [];
beforeAll(() => {
  redis = redisClient('schedule-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n);
  redis.disconnect();
});

function queue(tag: string, shards = 1) {
  const name = uniqueQueueName(tag);
  names.push(name);
  return createQueue(redis, { name, shards, types: { t: {}, u: { maxAttempts: 2 } }, maxPayloadBytes: 1_024 });
}

const redisNow = () => redisNowMs(redis);

describe('schedule', () => {
  it('orders pending jobs by due time and reports them by id', async () => {
    const q = queue('order');
    const base = Date.now() + 60_000;
    await q.scheduleMany([
      { id: 'c', type: 't', at: base + 3 },
      { id: 'a', type: 't', at: base + 1 },
      { id: 'b', type: 'u', at: new Date(base + 2), payload: { n: 2 } },
    ]);
    const k = q.keys[0];
    expect((await pendingJobs(redis, k!)).map((j) => j.id)).toEqual(['a', 'b', 'c']);
    const b = await q.get('b');
    expect(b).toMatchObject({ state: 'pending', type: 'u', payload: { n: 2 }, attempts: 0, maxAttempts: 2, dueAt: base + 2 });
    const s = await q.stats();
    expect(s).toMatchObject({ pending: 3, dueNow: 0, inFlight: 0, dead: 0, nextDueAt: base + 1 });
  });

  it('computes a delay from the Redis clock', async () => {
    const q = queue('delay');
    const before = await redisNow();
    const r = await q.schedule({ id: 'x', type: 't', delayMs: 5_000 });
    const after = await redisNow();
    expect(r.status).toBe('created');
    expect(r.dueAt).toBeGreaterThanOrEqual(before + 5_000);
    expect(r.dueAt).toBeLessThanOrEqual(after + 5_000);
  });

  it('accepts delays beyond the 24.8-day JavaScript timer limit', async () => {
    const q = queue('long');
    const days40 = 40 * 24 * 3_600_000;
    const r = await q.schedule({ id: 'far', type: 't', delayMs: days40 });
    expect(r.dueAt - Date.now()).toBeGreaterThan(days40 - 60_000);
    expect((await q.get('far'))?.dueAt).toBe(r.dueAt);
  });

  it('upsert moves an existing job, nx leaves it, xx needs it', async () => {
    const q = queue('modes');
    const t0 = Date.now() + 100_000;
    expect((await q.schedule({ id: 'j', type: 't', at: t0, payload: 1 })).status).toBe('created');
    expect((await q.schedule({ id: 'j', type: 't', at: t0 + 5, payload: 2 })).status).toBe('updated');
    expect(await q.get('j')).toMatchObject({ dueAt: t0 + 5, payload: 2 });

    expect((await q.schedule({ id: 'j', type: 't', at: t0 + 9, payload: 3, mode: 'nx' })).status).toBe('exists');
    expect(await q.get('j')).toMatchObject({ dueAt: t0 + 5, payload: 2 });
    expect((await q.schedule({ id: 'k', type: 't', at: t0, mode: 'nx' })).status).toBe('created');

    expect((await q.schedule({ id: 'none', type: 't', at: t0, mode: 'xx' })).status).toBe('not_found');
    expect(await q.get('none')).toBeNull();
    expect((await q.schedule({ id: 'j', type: 't', at: t0 + 7, payload: 4, mode: 'xx' })).status).toBe('updated');
    expect(await q.get('j')).toMatchObject({ dueAt: t0 + 7, payload: 4 });
  });

  it('reschedules by id keeping type and payload', async () => {
    const q = queue('resched');
    const t0 = Date.now() + 100_000;
    await q.schedule({ id: 'r', type: 'u', at: t0, payload: { keep: true } });
    expect((await q.reschedule('r', { at: t0 + 50 })).status).toBe('updated');
    expect(await q.get('r')).toMatchObject({ type: 'u', payload: { keep: true }, dueAt: t0 + 50 });
    expect((await q.reschedule('missing', { delayMs: 10 })).status).toBe('not_found');
    expect(await q.get('missing')).toBeNull();
  });

  it('cancels by id and reports what it removed', async () => {
    const q = queue('cancel');
    await q.schedule({ id: 'c1', type: 't', delayMs: 60_000 });
    expect(await q.cancel('c1')).toEqual({ cancelled: true, state: 'pending' });
    expect(await q.cancel('c1')).toEqual({ cancelled: false, state: null });
    expect(await q.get('c1')).toBeNull();
    expect((await q.stats()).pending).toBe(0);
  });

  it('routes ids to shards and sums stats over them', async () => {
    const q = queue('shards', 4);
    const inputs = Array.from({ length: 200 }, (_, i) => ({ id: `s${i}`, type: 't', delayMs: 60_000 + i }));
    await q.scheduleMany(inputs);
    const per = await q.shardStats();
    expect(per).toHaveLength(4);
    for (const s of per) expect(s.pending).toBeGreaterThan(20);
    expect((await q.stats()).pending).toBe(200);
    expect((await q.get('s17'))?.state).toBe('pending');
    expect((await q.cancel('s17')).cancelled).toBe(true);
    expect((await q.stats()).pending).toBe(199);
  });
});

describe('bad input writes nothing', () => {
  const bad: [string, Record<string, unknown>, string][] = [
    ['empty id', { id: '', type: 't', delayMs: 1 }, 'INVALID_JOB_ID'],
    ['over-long id', { id: 'x'.repeat(257), type: 't', delayMs: 1 }, 'INVALID_JOB_ID'],
    ['control character in id', { id: 'a\nb', type: 't', delayMs: 1 }, 'INVALID_JOB_ID'],
    ['NaN due time', { id: 'a', type: 't', at: Number.NaN }, 'INVALID_DUE_TIME'],
    ['infinite due time', { id: 'a', type: 't', at: Number.POSITIVE_INFINITY }, 'INVALID_DUE_TIME'],
    ['negative delay', { id: 'a', type: 't', delayMs: -5 }, 'INVALID_DUE_TIME'],
    ['invalid date', { id: 'a', type: 't', at: new Date('nope') }, 'INVALID_DUE_TIME'],
    ['payload above the limit', { id: 'a', type: 't', delayMs: 1, payload: 'x'.repeat(2_000) }, 'PAYLOAD_TOO_LARGE'],
    ['unserialisable payload', { id: 'a', type: 't', delayMs: 1, payload: { n: 1n } }, 'INVALID_PAYLOAD'],
    ['unknown job type', { id: 'a', type: 'nope', delayMs: 1 }, 'UNKNOWN_JOB_TYPE'],
    ['inherited property as job type', { id: 'a', type: 'toString', delayMs: 1 }, 'UNKNOWN_JOB_TYPE'],
    ['zero max attempts', { id: 'a', type: 't', delayMs: 1, maxAttempts: 0 }, 'INVALID_OPTIONS'],
  ];

  it.each(bad)('%s', async (_label, input, code) => {
    const q = queue('bad');
    // A valid job in the same bulk call must not be written either.
    const call = q.scheduleMany([{ id: 'ok', type: 't', delayMs: 1 }, input as never]);
    await expect(call).rejects.toBeInstanceOf(QueueInputError);
    await expect(call).rejects.toMatchObject({ code });
    expect(await redis.exists(...Object.values(q.keys[0]!))).toBe(0);
  });

  it('rejects bad queue options', () => {
    expect(() => createQueue(redis, { name: 'Bad Name', types: {} })).toThrow(QueueInputError);
    expect(() => createQueue(redis, { name: 'ok', types: { 'a,b': {} } })).toThrow(QueueInputError);
    expect(() => createQueue(redis, { name: 'ok', shards: 0, types: {} })).toThrow(QueueInputError);
  });
});

describe('bulk schedule with a repeated id', () => {
  it('treats the second occurrence as seeing the first', async () => {
    const q = queue('repeat');
    const t0 = Date.now() + 100_000;
    const r = await q.scheduleMany([
      { id: 'r', type: 't', at: t0, payload: 1 },
      { id: 'r', type: 't', at: t0 + 1, payload: 2, mode: 'nx' },
      { id: 'r', type: 't', at: t0 + 2, payload: 3 },
    ]);
    expect(r.map((x) => x.status)).toEqual(['created', 'exists', 'updated']);
    expect(await q.get('r')).toMatchObject({ dueAt: t0 + 2, payload: 3 });
    expect((await q.stats()).pending).toBe(1);
  });
});

describe('bulk schedule with a repeated existing id', () => {
  it('a reschedule after an upsert in the same call keeps the new payload', async () => {
    const q = queue('repeat2');
    const t0 = Date.now() + 100_000;
    await q.schedule({ id: 'e', type: 't', at: t0, payload: 'old' });
    await q.scheduleMany([{ id: 'e', type: 'u', at: t0 + 1, payload: 'new' }]);
    expect(await q.get('e')).toMatchObject({ type: 'u', payload: 'new' });
    const r = await q.scheduleMany([
      { id: 'e', type: 't', at: t0 + 2, payload: 'newer' },
      { id: 'e', type: 't', at: t0 + 3, payload: 'ignored', mode: 'nx' },
    ]);
    expect(r.map((x) => x.status)).toEqual(['updated', 'exists']);
    expect(await q.reschedule('e', { at: t0 + 4 })).toMatchObject({ status: 'updated', dueAt: t0 + 4 });
    expect(await q.get('e')).toMatchObject({ type: 't', payload: 'newer', dueAt: t0 + 4 });
  });
});

describe('bulk schedule with mixed settings', () => {
  it('keeps input order across runs of different modes, types and attempt limits', async () => {
    const q = queue('mixed', 2);
    const t0 = Date.now() + 100_000;
    const r = await q.scheduleMany([
      { id: 'x', type: 't', at: t0, payload: 1 },
      { id: 'x', type: 'u', at: t0 + 1, payload: 2, mode: 'nx' },
      { id: 'y', type: 'u', delayMs: 50_000, payload: 'y' },
      { id: 'x', type: 't', at: t0 + 3, payload: 3, maxAttempts: 3 },
      { id: 'z', type: 'u', at: t0 + 4, mode: 'xx' },
    ]);
    expect(r.map((x) => x.status)).toEqual(['created', 'exists', 'created', 'updated', 'not_found']);
    expect(r[4]?.dueAt).toBe(0);
    expect(await q.get('x')).toMatchObject({ type: 't', payload: 3, maxAttempts: 3, dueAt: t0 + 3 });
    const y = await q.get('y');
    expect(y).toMatchObject({ type: 'u', payload: 'y', dueAt: r[2]?.dueAt });
    expect(await q.get('z')).toBeNull();
  });

  it('a reschedule keeps the job\'s own attempt limit', async () => {
    const q = queue('keepmax');
    await q.schedule({ id: 'm', type: 't', delayMs: 60_000, payload: { a: 1 }, maxAttempts: 7 });
    await q.reschedule('m', { delayMs: 120_000 });
    expect(await q.get('m')).toMatchObject({ maxAttempts: 7, payload: { a: 1 }, type: 't' });
  });
});

describe('pending mode', () => {
  it('moves a waiting job but never one in flight, nor a dead or missing one', async () => {
    const q = queue('pending');
    const t0 = Date.now() + 100_000;
    await q.schedule({ id: 'w', type: 't', at: t0, payload: 1 });
    expect(await q.schedule({ id: 'w', type: 't', at: t0 + 5, payload: 2, mode: 'pending' })).toMatchObject({ status: 'updated', dueAt: t0 + 5 });
    expect(await q.get('w')).toMatchObject({ state: 'pending', payload: 2 });

    await q.schedule({ id: 'f', type: 't', delayMs: 0 });
    const claim = await runClaim(redis, q.keys[0]!, 10, 60_000, 10);
    expect(claim.jobs.map((j) => j.id)).toEqual(['f']);
    expect(await q.schedule({ id: 'f', type: 't', at: t0, mode: 'pending' })).toMatchObject({ status: 'not_found', dueAt: 0 });
    expect((await q.get('f'))?.state).toBe('in_flight');
    expect(await q.schedule({ id: 'nobody', type: 't', at: t0, mode: 'pending' })).toMatchObject({ status: 'not_found' });
    await expect(q.schedule({ id: 'x', type: 't', at: t0, mode: 'bogus' as never })).rejects.toThrow(QueueInputError);
  });
});
