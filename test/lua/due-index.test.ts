// The bucketed due index (lua/lib/due-index.lua) against a model: random
// schedules, moves, cancels, claims, retries, releases, deaths and redrives,
// with many jobs sharing a due time, must keep every invariant of the index,
// hold exactly the model's pending jobs at the model's due times, and hand
// out due jobs earliest first. Buckets stay small listpacks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../src/core/redis.js';
import { createQueue, type Queue, type ScheduleInput } from '../../src/queue/producer/queue.js';
import { runRedrive } from '../../src/queue/scripts/admin-scripts.js';
import { runAck, runClaim, runNack, runRelease } from '../../src/queue/scripts/scripts.js';
import { BUCKET_MAX, dueBuckets, dueIndexProblems, pendingJobs } from '../helpers/due-index.js';
import { dropQueue, redisClient, redisNowMs, uniqueQueueName } from '../helpers/redis.js';

let redis: RedisClient;
const names: string[] = [];
beforeAll(() => {
  redis = redisClient('due-index-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n);
  redis.disconnect();
});

function queue(tag: string): Queue {
  const name = uniqueQueueName(tag);
  names.push(name);
  return createQueue(redis, { name, types: { t: {} }, recordGroups: true });
}

const redisNow = () => redisNowMs(redis);

/** Deterministic PRNG (mulberry32) so a failure can be replayed. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n: number) => Math.floor(next() * n), pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)] as T };
}

type Model = { pending: Map<string, number>; inflight: Map<string, number>; dead: Set<string> };

async function expectMatches(q: Queue, m: Model, step: string) {
  const k = q.keys[0]!;
  expect(await dueIndexProblems(redis, k), step).toEqual([]);
  const held = await pendingJobs(redis, k);
  expect(new Map(held.map((j) => [j.id, j.due])), step).toEqual(m.pending);
}

describe('due index', () => {
  it('stays sound, matches a model and claims earliest first through random operations', async () => {
    const q = queue('model');
    const k = q.keys[0]!;
    const r = rng(20261123);
    const m: Model = { pending: new Map(), inflight: new Map(), dead: new Set() };
    const ids = Array.from({ length: 1_500 }, (_, i) => `job-${i}`);
    const t0 = await redisNow();
    // Due times: a few shared instants (runs of equal times cannot be split),
    // a spread in the past (due now), and a spread in the future.
    const shared = [t0 - 5_000, t0 + 3_600_000, t0 + 7_200_000];
    const dueTime = () => {
      const c = r.int(10);
      if (c < 3) return r.pick(shared);
      if (c < 6) return t0 - 1 - r.int(60_000);
      return t0 + 60_000 + r.int(3_600_000);
    };
    const modes = ['upsert', 'upsert', 'nx', 'xx', 'pending'] as const;

    for (let step = 0; step < 300; step++) {
      const op = r.int(10);
      if (op < 5) {
        const mode = r.pick(modes);
        const jobs: ScheduleInput[] = Array.from({ length: 1 + r.int(60) }, () => ({ id: r.pick(ids), type: 't', at: dueTime(), mode }));
        const results = await q.scheduleMany(jobs);
        results.forEach((res, i) => {
          const id = jobs[i]!.id;
          const exists = m.pending.has(id) || m.inflight.has(id) || m.dead.has(id);
          const expected =
            mode === 'nx' ? (m.dead.has(id) ? 'dead' : exists ? 'exists' : 'created')
            : mode === 'xx' ? (m.pending.has(id) || m.inflight.has(id) ? 'updated' : 'not_found')
            : mode === 'pending' ? (m.pending.has(id) ? 'updated' : 'not_found')
            : exists ? 'updated' : 'created';
          expect(res.status, `step ${step}: ${mode} ${id}`).toBe(expected);
          if (res.status === 'created' || res.status === 'updated') {
            m.inflight.delete(id);
            m.dead.delete(id);
            m.pending.set(id, res.dueAt);
          }
        });
      } else if (op < 7) {
        const max = 1 + r.int(200);
        const c = await runClaim(redis, k, max, 600_000, 0);
        const dueNow = [...m.pending.values()].filter((d) => d <= c.now).sort((a, b) => a - b);
        // Exactly the earliest due jobs, whichever of equal times come first.
        expect(c.jobs.map((j) => j.dueAt).sort((a, b) => a - b), `step ${step}: claim ${max}`).toEqual(dueNow.slice(0, max));
        for (const j of c.jobs) {
          expect(m.pending.get(j.id)).toBe(j.dueAt);
          m.pending.delete(j.id);
          m.inflight.set(j.id, Number(j.record.split(',')[0]));
        }
        const head = [...m.pending.values()].reduce((a, b) => Math.min(a, b), Number.POSITIVE_INFINITY);
        expect(c.nextDue ?? Number.POSITIVE_INFINITY).toBe(head);
      } else if (op < 9 && m.inflight.size > 0) {
        // Settle some deliveries: ack, retry later, release, or dead-letter.
        for (const [id, token] of [...m.inflight].slice(0, 1 + r.int(40))) {
          const how = r.int(4);
          m.inflight.delete(id);
          if (how === 0) {
            expect((await runAck(redis, k, [{ id, token }])).acked).toBe(1);
          } else if (how === 1) {
            const n = await runNack(redis, k, id, token, 'retry', r.int(120_000), 'boom');
            m.pending.set(id, n.at);
          } else if (how === 2) {
            const at = dueTime();
            expect(await runRelease(redis, k, [{ id, token }], { at })).toBe(1);
            m.pending.set(id, at);
          } else {
            expect((await runNack(redis, k, id, token, 'dead', 0, 'boom')).code).toBe(2);
            m.dead.add(id);
          }
        }
      } else {
        // Cancel a few, and redrive one dead job now and then.
        for (let i = 0; i < 1 + r.int(20); i++) {
          const id = r.pick(ids);
          await q.cancel(id);
          m.pending.delete(id);
          m.inflight.delete(id);
          m.dead.delete(id);
        }
        const deadOne = [...m.dead][0];
        if (deadOne !== undefined) {
          expect(await runRedrive(redis, k, { id: deadOne })).toBe(1);
          m.dead.delete(deadOne);
          m.pending.set(deadOne, (await q.get(deadOne))!.dueAt!);
        }
      }
      if (step % 10 === 9) await expectMatches(q, m, `after step ${step}`);
    }
    await expectMatches(q, m, 'at the end');
    const s = await q.stats();
    expect(s).toMatchObject({ pending: m.pending.size, inFlight: m.inflight.size, dead: m.dead.size });
    const now = await redisNow();
    expect(s.dueNow).toBe([...m.pending.values()].filter((d) => d <= now).length);
    // The run really exercised splits, shared due times and many buckets.
    expect((await dueBuckets(redis, k)).length).toBeGreaterThan(5);
  });

  it('keeps buckets listpack-sized whether due times come in random or rising order', async () => {
    const base = (await redisNow()) + 3_600_000;
    for (const order of ['random', 'rising'] as const) {
      const q = queue(`shape-${order}`);
      const r = rng(7);
      const dues = Array.from({ length: 5_000 }, (_, i) => base + i * 7);
      if (order === 'random') {
        for (let i = dues.length - 1; i > 0; i--) {
          const j = r.int(i + 1);
          [dues[i], dues[j]] = [dues[j]!, dues[i]!];
        }
      }
      await q.scheduleMany(dues.map((at, i) => ({ id: `j${i}`, type: 't', at })));
      const k = q.keys[0]!;
      expect(await dueIndexProblems(redis, k)).toEqual([]);
      const buckets = await dueBuckets(redis, k);
      const sizes = buckets.map((b) => b.jobs.length);
      expect(Math.max(...sizes), order).toBeLessThanOrEqual(BUCKET_MAX);
      // Splits leave at least half; rising times fill each bucket before the next.
      if (order === 'rising') expect(buckets.length).toBe(Math.ceil(5_000 / BUCKET_MAX));
      else expect(5_000 / buckets.length).toBeGreaterThanOrEqual(BUCKET_MAX / 2);
      for (const b of buckets.slice(0, 20)) expect(await redis.object('ENCODING', k.dueBuckets + b.name)).toBe('listpack');
    }
  });

  it('claims across several buckets in one call, earliest first', async () => {
    const q = queue('walk');
    const k = q.keys[0]!;
    const now = await redisNow();
    await q.scheduleMany(Array.from({ length: 600 }, (_, i) => ({ id: `w${i}`, type: 't', at: now - 10_000 + i * 10 })));
    expect((await dueBuckets(redis, k)).length).toBeGreaterThanOrEqual(4);
    const c = await runClaim(redis, k, 500, 600_000, 0);
    expect(c.jobs.map((j) => j.id)).toEqual(Array.from({ length: 500 }, (_, i) => `w${i}`));
    expect(c.nextDue).toBe(now - 10_000 + 500 * 10);
    expect(await dueIndexProblems(redis, k)).toEqual([]);
  });

  it('drops a bucket when its last job leaves by cancel or by a move, and claims on past the gap', async () => {
    const q = queue('gap');
    const k = q.keys[0]!;
    const now = await redisNow();
    await q.scheduleMany(Array.from({ length: 400 }, (_, i) => ({ id: `g${i}`, type: 't', at: now - 100_000 + i })));
    const [first, second] = await dueBuckets(redis, k);
    for (const j of first!.jobs) await q.cancel(j.id);
    for (const j of second!.jobs) await q.reschedule(j.id, { at: now + 3_600_000 });
    expect((await dueBuckets(redis, k)).map((b) => b.name)).not.toContain(first!.name);
    expect((await dueBuckets(redis, k)).map((b) => b.name)).not.toContain(second!.name);
    expect(await dueIndexProblems(redis, k)).toEqual([]);
    const left = 400 - first!.jobs.length - second!.jobs.length;
    const c = await runClaim(redis, k, 1_000, 600_000, 0);
    expect(c.jobs).toHaveLength(left);
    expect(c.nextDue).toBe(now + 3_600_000);
  });

  it('merges buckets thinned out by cancels, so sparse jobs do not keep a bucket each', async () => {
    const q = queue('thin');
    const k = q.keys[0]!;
    const now = await redisNow();
    const n = BUCKET_MAX * 20;
    await q.scheduleMany(Array.from({ length: n }, (_, i) => ({ id: `t${i}`, type: 't', at: now - 100_000 + i })));
    expect((await dueBuckets(redis, k)).length).toBe(20);
    // Most orders are paid: their expiry jobs are cancelled, 3 of every 64 stay.
    const kept = Array.from({ length: n }, (_, i) => i).filter((i) => i % BUCKET_MAX < 3);
    for (let i = 0; i < n; i++) if (i % BUCKET_MAX >= 3) await q.cancel(`t${i}`);
    expect(await dueIndexProblems(redis, k)).toEqual([]);
    const buckets = await dueBuckets(redis, k);
    expect(buckets.length).toBeLessThanOrEqual(Math.ceil(kept.length / (BUCKET_MAX / 4)));
    expect(Math.max(...buckets.map((b) => b.jobs.length))).toBeLessThanOrEqual(BUCKET_MAX);
    const c = await runClaim(redis, k, n, 600_000, 0);
    expect(c.jobs.map((j) => j.id)).toEqual(kept.map((i) => `t${i}`));
    expect(c.jobs.map((j) => j.dueAt)).toEqual(kept.map((i) => now - 100_000 + i));
  });

  it('makes room in a full bucket for a job due before all of its jobs but after its bound', async () => {
    const q = queue('prepend');
    const k = q.keys[0]!;
    const t = (await redisNow()) + 3_600_000;
    await q.schedule({ id: 'x', type: 't', at: t });
    await q.scheduleMany(Array.from({ length: BUCKET_MAX - 1 }, (_, i) => ({ id: `f${i}`, type: 't', at: t + 100 + i })));
    await q.cancel('x'); // the first bucket keeps its bound t, its jobs start at t + 100
    await q.schedule({ id: 'fill', type: 't', at: t + 150 });
    const before = await dueBuckets(redis, k);
    expect(before[0]!.jobs).toHaveLength(BUCKET_MAX);
    await q.schedule({ id: 'early', type: 't', at: t + 50 });
    expect(await dueIndexProblems(redis, k)).toEqual([]);
    const after = await dueBuckets(redis, k);
    expect(after[0]!.jobs.map((j) => j.id)).toEqual(['early']);
    expect(after[1]!.jobs).toHaveLength(BUCKET_MAX);
    expect((await pendingJobs(redis, k)).map((j) => j.due)).toEqual([t + 50, ...Array.from({ length: BUCKET_MAX - 1 }, (_, i) => t + 100 + i).concat(t + 150).sort((a, b) => a - b)]);
  });

  it('holds many jobs of one due time in one bucket and still claims in order', async () => {
    const q = queue('same-time');
    const k = q.keys[0]!;
    const at = (await redisNow()) - 1_000;
    await q.scheduleMany(Array.from({ length: 300 }, (_, i) => ({ id: `same${i}`, type: 't', at })));
    await q.scheduleMany([
      { id: 'earlier', type: 't', at: at - 10 },
      { id: 'later', type: 't', at: at + 10 },
    ]);
    expect(await dueIndexProblems(redis, k)).toEqual([]);
    const order: string[] = [];
    for (;;) {
      const c = await runClaim(redis, k, 50, 600_000, 0);
      if (c.jobs.length === 0) break;
      order.push(...c.jobs.map((j) => j.id));
    }
    expect(order).toHaveLength(302);
    expect(order[0]).toBe('earlier');
    expect(order[301]).toBe('later');
    expect(await redis.exists(k.due)).toBe(0);
  });

  it('returns an expired lease to its delivery due time, ahead of later jobs', async () => {
    const q = queue('reclaim');
    const k = q.keys[0]!;
    const now = await redisNow();
    await q.scheduleMany([
      { id: 'old', type: 't', at: now - 5_000 },
      { id: 'new', type: 't', at: now - 10 },
    ]);
    const first = await runClaim(redis, k, 1, 1, 0);
    expect(first.jobs.map((j) => j.id)).toEqual(['old']);
    await new Promise((res) => setTimeout(res, 20));
    const again = await runClaim(redis, k, 10, 600_000, 10);
    expect(again.reclaimed).toBe(1);
    expect(again.jobs.map((j) => [j.id, j.dueAt])).toEqual([
      ['old', now - 5_000],
      ['new', now - 10],
    ]);
    expect(await dueIndexProblems(redis, k)).toEqual([]);
  });
});
