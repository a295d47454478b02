// The batcher's scripts against the real Redis: full batches taken exactly
// once, oldest first, first arrival and deadline kept right, overdue groups
// taken by the Redis clock, removal and restore, and a group's own rule
// (batch size, maximum wait) set, applied to what waits, and cleared.
import { type RedisClient, whenReady } from '../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBatcher } from '../../src/queue/batcher/batcher.js';
import type { TakenItem } from '../../src/queue/scripts/batch-scripts.js';
import { QueueInputError } from '../../src/queue/errors.js';
import { dropQueue, redisClient, sleep, uniqueQueueName, waitFor } from '../helpers/redis.js';

let redis: RedisClient;
const names: string[] = [];
beforeAll(() => {
  redis = redisClient('batcher-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n, 'bq');
  redis.disconnect();
});

function batcher(size: number, maxWaitMs = 60_000) {
  const name = uniqueQueueName('bat');
  names.push(name);
  return createBatcher(redis, { name, batchSize: size, maxWaitMs });
}

describe('batch-add', () => {
  it('takes exactly one batch, oldest first, when the group fills up', async () => {
    const b = batcher(3);
    expect((await b.add('A', 'p1')).batches).toEqual([]);
    await sleep(2);
    expect((await b.add('A', 'p2')).batches).toEqual([]);
    const third = await b.add('A', 'p3');
    expect(third.batches.map((batch) => batch.map((t) => t.item))).toEqual([['p1', 'p2', 'p3']]);
    expect(third.waiting).toBe(0);
    expect(await b.waiting('A')).toEqual({ count: 0, firstArrival: null, deadline: null });
    expect(await redis.zcard(b.keys[0]!.groups)).toBe(0);
  });

  it('is idempotent for an item already waiting', async () => {
    const b = batcher(3);
    await b.add('A', 'p1');
    const before = await b.waiting('A');
    await sleep(2);
    const again = await b.add('A', 'p1');
    expect(again).toMatchObject({ added: false, waiting: 1, batches: [] });
    expect(await b.waiting('A')).toEqual(before);
  });

  it('takes every full batch and keeps the right first arrival for what stays when more than a batch waits', async () => {
    const big = batcher(10);
    for (let i = 0; i < 5; i++) {
      await big.add('A', `p${i}`);
      await sleep(2);
    }
    // The same keys with a smaller batch size (a configuration change): six wait, one add takes 4, two stay.
    const small = createBatcher(redis, { name: big.name, batchSize: 4, maxWaitMs: 60_000 });
    const r = await small.add('A', 'p5');
    expect(r.batches.map((batch) => batch.map((t) => t.item))).toEqual([['p0', 'p1', 'p2', 'p3']]);
    const arrivals = await redis.zrange(`${big.keys[0]!.itemsPrefix}A`, 0, -1, 'WITHSCORES');
    expect(arrivals[0]).toBe('p4');
    expect(r.waiting).toBe(2);
    expect((await small.waiting('A')).firstArrival).toBe(Number(arrivals[1]));
    // With size 1 every waiting item is a full batch of its own: all taken at once.
    const one = createBatcher(redis, { name: big.name, batchSize: 1, maxWaitMs: 60_000 });
    const all = await one.add('A', 'p6');
    expect(all.batches.map((batch) => batch.map((t) => t.item))).toEqual([['p4'], ['p5'], ['p6']]);
    expect(await one.waiting('A')).toEqual({ count: 0, firstArrival: null, deadline: null });
  });

  it('moves the first arrival earlier for an item older than every waiting one, and announces it', async () => {
    const b = batcher(5);
    const sub = redis.duplicate();
    await whenReady(sub, 5_000);
    const heard: string[] = [];
    await sub.subscribe(b.keys[0]!.wake);
    sub.on('message', (_c, m) => heard.push(m));
    try {
      await b.add('A', 'young', 2_000_000);
      await b.add('A', 'old', 1_000_000); // a repeated intake of a parcel Redis had lost
      await b.add('A', 'middle', 1_500_000);
      expect((await b.waiting('A')).firstArrival).toBe(1_000_000);
      expect(await waitFor(() => heard.length >= 2, 2_000)).toBe(true);
      // The group's deadline: first arrival + the maximum wait (60 s).
      expect(heard).toEqual(['2060000', '1060000']);
    } finally {
      sub.disconnect();
    }
  });

  it('takes the arrival time the caller recorded', async () => {
    const b = batcher(5);
    await b.add('A', 'old', 1_000_000);
    await b.add('A', 'new');
    expect((await b.waiting('A')).firstArrival).toBe(1_000_000);
    const r = await b.takeDue(0);
    expect(r.batches).toEqual([{ group: 'A', items: [{ item: 'old', arrivedAt: 1_000_000 }, { item: 'new', arrivedAt: expect.any(Number) }] }]);
  });

  it('refuses group names that could break out of the key', async () => {
    const b = batcher(3);
    for (const bad of ['', 'a b', 'a:b', 'x'.repeat(101), 'a}b', '{A}', 'ä']) {
      await expect(b.add(bad, 'p')).rejects.toBeInstanceOf(QueueInputError);
    }
    await expect(b.add('A', '')).rejects.toBeInstanceOf(QueueInputError);
    // A name of two parts (the parcels' "<client>/<area>") is one group.
    expect((await b.add('client.b/B-7', 'p')).waiting).toBe(1);
    expect(await b.waiting('client.b/B-7')).toMatchObject({ count: 1 });
  });
});

describe('batch-take-due', () => {
  it('takes groups whose first item waited the max wait, by the Redis clock', async () => {
    const b = batcher(10, 150);
    await b.add('A', 'a1');
    await b.add('B', 'b1');
    await b.add('B', 'b2');
    const early = await b.takeDue(0);
    expect(early.batches).toEqual([]);
    expect(early.nextDeadline).not.toBeNull();
    await sleep(160);
    await b.add('C', 'c1'); // too young
    const due = await b.takeDue(0);
    expect(due.batches.map((x) => [x.group, x.items.map((i) => i.item)]).sort()).toEqual([
      ['A', ['a1']],
      ['B', ['b1', 'b2']],
    ]);
    for (const x of due.batches) for (const i of x.items) expect(due.now - i.arrivedAt).toBeGreaterThanOrEqual(150);
    expect(await b.waiting('A')).toEqual({ count: 0, firstArrival: null, deadline: null });
    expect((await b.waiting('C')).count).toBe(1);
    expect((await b.takeDue(0)).batches).toEqual([]);
  });

  it('removes items batched elsewhere and restores a batch that failed to commit', async () => {
    const b = batcher(10, 60_000);
    await b.add('A', 'x1');
    await sleep(2);
    await b.add('A', 'x2');
    await sleep(2);
    await b.add('A', 'x3');
    const [x1, , x3] = (await redis.zrange(`${b.keys[0]!.itemsPrefix}A`, 0, -1, 'WITHSCORES')).filter((_, i) => i % 2 === 1).map(Number);
    expect(await b.remove('A', ['x1', 'x2', 'nope'])).toBe(2);
    expect(await b.waiting('A')).toEqual({ count: 1, firstArrival: x3, deadline: x3! + 60_000 });
    expect(await b.restore('A', [{ item: 'x1', arrivedAt: x1! }])).toEqual({ batches: [] });
    expect(await b.waiting('A')).toEqual({ count: 2, firstArrival: x1, deadline: x1! + 60_000 });
  });

  it('takes the full batches a restore completes when asked, oldest first, and announces what then waits first', async () => {
    const b = batcher(3, 60_000);
    const sub = redis.duplicate();
    await whenReady(sub, 5_000);
    const heard: string[] = [];
    await sub.subscribe(b.keys[0]!.wake);
    sub.on('message', (_c, m) => heard.push(m));
    try {
      await b.add('A', 'new1', 5_000);
      await b.add('A', 'new2', 6_000);
      // Parcels a commit left over come back: the group holds four, one full batch.
      const r = await b.restore(
        'A',
        [
          { item: 'old1', arrivedAt: 1_000 },
          { item: 'old2', arrivedAt: 2_000 },
        ],
        { takeFull: true },
      );
      expect(r.batches.map((batch) => batch.map((t) => t.item))).toEqual([['old1', 'old2', 'new1']]);
      expect(await b.waiting('A')).toEqual({ count: 1, firstArrival: 6_000, deadline: 66_000 });
      // Without takeFull a restore never takes.
      const kept = await b.restore('A', [
        { item: 'old1', arrivedAt: 1_000 },
        { item: 'old2', arrivedAt: 2_000 },
      ]);
      expect(kept.batches).toEqual([]);
      expect(await b.waiting('A')).toEqual({ count: 3, firstArrival: 1_000, deadline: 61_000 });
      expect(await waitFor(() => heard.includes('66000') && heard.includes('61000'), 2_000)).toBe(true);
    } finally {
      sub.disconnect();
    }
  });
});

describe('a group rule', () => {
  const items = (b: TakenItem[][]) => b.map((batch) => batch.map((t) => t.item));

  it('add takes full batches by the group size, another group by the default', async () => {
    const b = batcher(10);
    expect(await b.setRule('A', { batchSize: 2, maxWaitMs: null })).toEqual({ batches: [] });
    await b.add('A', 'a1', 1_000);
    expect(items((await b.add('A', 'a2', 2_000)).batches)).toEqual([['a1', 'a2']]);
    await b.add('B', 'b1', 1_000);
    expect((await b.add('B', 'b2', 2_000)).batches).toEqual([]);
    expect(await b.rules(0)).toEqual(new Map([['A', { batchSize: 2, maxWaitMs: null }]]));
  });

  it('setRule (restore with a rule and no items) applies to what waits: a smaller size takes full batches, the deadline moves with the wait, and announces it', async () => {
    const b = batcher(10, 60_000);
    const sub = redis.duplicate();
    await whenReady(sub, 5_000);
    const heard: string[] = [];
    await sub.subscribe(b.keys[0]!.wake);
    sub.on('message', (_c, m) => heard.push(m));
    try {
      for (let i = 1; i <= 5; i++) await b.add('A', `p${i}`, i * 1_000);
      expect((await b.waiting('A')).deadline).toBe(61_000);
      const r = await b.setRule('A', { batchSize: 2, maxWaitMs: 500 });
      expect(items(r.batches)).toEqual([
        ['p1', 'p2'],
        ['p3', 'p4'],
      ]);
      expect(await b.waiting('A')).toEqual({ count: 1, firstArrival: 5_000, deadline: 5_500 });
      expect(await waitFor(() => heard.includes('5500'), 2_000)).toBe(true);
      // Long past its new deadline: the next take-due takes it.
      expect((await b.takeDue(0)).batches).toEqual([{ group: 'A', items: [{ item: 'p5', arrivedAt: 5_000 }] }]);
      // Cleared: the defaults again.
      await b.add('A', 'p6', 7_000);
      expect(await b.setRule('A', { batchSize: null, maxWaitMs: null })).toEqual({ batches: [] });
      expect(await b.waiting('A')).toMatchObject({ deadline: 67_000 });
      expect((await b.rules(0)).has('A')).toBe(false);
    } finally {
      sub.disconnect();
    }
  });

  it('take-due judges each group by its own wait and takes at most its own size', async () => {
    const b = batcher(10, 3_600_000);
    const now = Number((await redis.time())[0]) * 1_000;
    await b.setRule('SHORT', { batchSize: 2, maxWaitMs: 1_000 });
    for (let i = 0; i < 3; i++) await b.restore('SHORT', [{ item: `s${i}`, arrivedAt: now - 5_000 + i }]);
    await b.add('LONG', 'l1', now - 5_000);
    const r = await b.takeDue(0);
    expect(r.batches).toEqual([
      {
        group: 'SHORT',
        items: [
          { item: 's0', arrivedAt: now - 5_000 },
          { item: 's1', arrivedAt: now - 4_999 },
        ],
      },
    ]);
    expect(r.nextDeadline).toBe(now - 5_000 + 2 + 1_000); // s2's deadline: due, taken next round
    expect((await b.takeDue(0)).batches.map((x) => x.group)).toEqual(['SHORT']);
    expect(await b.waiting('LONG')).toMatchObject({ count: 1, deadline: now - 5_000 + 3_600_000 });
  });

  it('restore sets the rule it is given before it takes, and remove keeps the deadline by the rule', async () => {
    const b = batcher(10, 60_000);
    const r = await b.restore(
      'A',
      [1, 2, 3, 4, 5].map((i) => ({ item: `p${i}`, arrivedAt: i * 1_000 })),
      { takeFull: true, rule: { batchSize: 4, maxWaitMs: 2_000 } },
    );
    expect(items(r.batches)).toEqual([['p1', 'p2', 'p3', 'p4']]);
    expect(await b.waiting('A')).toEqual({ count: 1, firstArrival: 5_000, deadline: 7_000 });
    await b.add('A', 'p0', 500);
    expect(await b.remove('A', ['p0'])).toBe(1);
    expect(await b.waiting('A')).toEqual({ count: 1, firstArrival: 5_000, deadline: 7_000 });
    // A restore without a rule leaves it as it is.
    await b.restore('A', [{ item: 'p9', arrivedAt: 9_000 }]);
    expect(await b.rules(0)).toEqual(new Map([['A', { batchSize: 4, maxWaitMs: 2_000 }]]));
  });

  it('a versioned rule: an older one is refused (setRule or restore), the same or a newer one set; cleared, its version kept', async () => {
    const b = batcher(10, 60_000);
    for (let i = 1; i <= 3; i++) await b.add('A', `p${i}`, i * 1_000);
    await b.setRule('A', { batchSize: 5, maxWaitMs: 2_000, version: 3 });
    // Older: refused, and the items a restore brings are judged by the group's own (3 + 2 = 5: full by size 5, not by 2).
    expect(await b.setRule('A', { batchSize: 2, maxWaitMs: null, version: 2 })).toEqual({ batches: [] });
    const r = await b.restore('A', [4, 5].map((i) => ({ item: `p${i}`, arrivedAt: i * 1_000 })), { takeFull: true, rule: { batchSize: 2, maxWaitMs: null, version: 1 } });
    expect(items(r.batches)).toEqual([['p1', 'p2', 'p3', 'p4', 'p5']]);
    expect(await b.rules(0)).toEqual(new Map([['A', { batchSize: 5, maxWaitMs: 2_000, version: 3 }]]));
    // The same version again, then a newer one: set.
    await b.setRule('A', { batchSize: 5, maxWaitMs: 2_000, version: 3 });
    await b.setRule('A', { batchSize: 4, maxWaitMs: null, version: 4 });
    expect((await b.rules(0)).get('A')).toEqual({ batchSize: 4, maxWaitMs: null, version: 4 });
    // Back to the defaults at version 5: no rule, but version 4 cannot come back.
    await b.setRule('A', { batchSize: null, maxWaitMs: null, version: 5 });
    await b.setRule('A', { batchSize: 4, maxWaitMs: null, version: 4 });
    expect((await b.rules(0)).has('A')).toBe(false);
    expect(await redis.hget(b.keys[0]!.groupRules, 'A')).toBe(',,5');
    // A rule without a version is set whatever the group holds (the caller keeps no versions).
    await b.setRule('A', { batchSize: 7, maxWaitMs: null });
    expect((await b.rules(0)).get('A')).toEqual({ batchSize: 7, maxWaitMs: null });
  });

  it('restore with a rule and no items is the rule change alone (no pairs for its chunked put back)', async () => {
    const b = batcher(10, 60_000);
    for (let i = 1; i <= 3; i++) await b.add('A', `p${i}`, i * 1_000);
    const r = await b.restore('A', [], { takeFull: true, rule: { batchSize: 2, maxWaitMs: 500, version: 1 } });
    expect(items(r.batches)).toEqual([['p1', 'p2']]);
    expect(await b.waiting('A')).toEqual({ count: 1, firstArrival: 3_000, deadline: 3_500 });
    // Without takeFull: the rule and the deadline only (p3 alone is a full batch of 1, left waiting).
    expect(await b.restore('A', [], { rule: { batchSize: 1, maxWaitMs: 100, version: 2 } })).toEqual({ batches: [] });
    expect(await b.waiting('A')).toEqual({ count: 1, firstArrival: 3_000, deadline: 3_100 });
  });

  it('refuses a rule that could not be kept as digits', async () => {
    const b = batcher(3);
    for (const bad of [
      { batchSize: 0, maxWaitMs: null },
      { batchSize: 1.5, maxWaitMs: null },
      { batchSize: null, maxWaitMs: -1 },
      { batchSize: null, maxWaitMs: 0.5 },
      { batchSize: 2, maxWaitMs: null, version: 0 },
      { batchSize: 2, maxWaitMs: null, version: 1.5 },
    ]) {
      await expect(b.setRule('A', bad)).rejects.toBeInstanceOf(QueueInputError);
    }
    expect(await b.rules(0)).toEqual(new Map());
  });
});
