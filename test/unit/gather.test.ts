// The gatherer: calls of one event-loop turn become one batch call, answers and
// failures reach the right callers.
import { describe, expect, it } from 'vitest';
import { createGatherer, createKeyedGatherer, settleEach } from '../../src/core/gather.js';

describe('gatherer', () => {
  it('runs the calls of one turn as one batch, in order, split at the batch limit', async () => {
    const batches: number[][] = [];
    const g = createGatherer<number, number>(async (items) => {
      batches.push([...items]);
      return items.map((i) => ({ ok: true, value: i * 10 }));
    }, 3);
    const first = await Promise.all([1, 2, 3, 4, 5].map((i) => g.submit(i)));
    expect(first).toEqual([10, 20, 30, 40, 50]);
    expect(batches).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
    // A later turn is a new batch.
    expect(await g.submit(6)).toBe(60);
    expect(batches[2]).toEqual([6]);
  });

  it('fails only the items the batch call says failed', async () => {
    const g = createGatherer<number, number>(
      async (items) => items.map((i) => (i % 2 ? { ok: true, value: i } : { ok: false, error: new Error(`even ${i}`) })),
      10,
    );
    const r = await Promise.allSettled([1, 2, 3].map((i) => g.submit(i)));
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((r[1] as PromiseRejectedResult).reason.message).toBe('even 2');
  });

  it('fails every item of a batch whose call throws or answers the wrong count', async () => {
    const boom = createGatherer<number, number>(async () => {
      throw new Error('down');
    }, 10);
    const r = await Promise.allSettled([1, 2].map((i) => boom.submit(i)));
    expect(r.every((x) => x.status === 'rejected' && x.reason.message === 'down')).toBe(true);
    const short = createGatherer<number, number>(async () => [{ ok: true, value: 1 }], 10);
    const s = await Promise.allSettled([1, 2].map((i) => short.submit(i)));
    expect(s.every((x) => x.status === 'rejected' && /answered 1 of 2/.test(x.reason.message))).toBe(true);
    const holed = createGatherer<number, number>(async () => [{ ok: true, value: 1 }, , { ok: true, value: 3 }] as { ok: true; value: number }[], 10);
    const h = await Promise.allSettled([1, 2, 3].map((i) => holed.submit(i)));
    expect(h.every((x) => x.status === 'rejected' && /item 1 without an answer/.test(x.reason.message))).toBe(true);
  });

  it('settles each item on its own', async () => {
    const r = await settleEach([1, 2], async (i) => {
      if (i === 2) throw new Error('no');
      return i;
    });
    expect(r).toEqual([
      { ok: true, value: 1 },
      { ok: false, error: new Error('no') },
    ]);
  });

  it('runs one batch call per key and turn, keys in the order first asked, each split at the limit', async () => {
    const calls: [string, number[]][] = [];
    const g = createKeyedGatherer<number, number>(async (key, items) => {
      calls.push([key, [...items]]);
      return items.map((i) => i * 10);
    }, 2);
    const r = await Promise.all([g.submit('b', 1), g.submit('a', 2), g.submit('b', 3), g.submit('b', 4)]);
    expect(r).toEqual([10, 20, 30, 40]);
    expect(calls).toEqual([
      ['b', [1, 3]],
      ['b', [4]],
      ['a', [2]],
    ]);
  });

  it("answers each key's callers when its own call does, and fails only the callers of a call that throws", async () => {
    let releaseSlow!: () => void;
    const slow = new Promise<void>((r) => (releaseSlow = r));
    const g = createKeyedGatherer<number, number>(async (key, items) => {
      if (key === 'slow') await slow;
      if (key === 'boom') throw new Error('down');
      return [...items];
    }, 10);
    const short = createKeyedGatherer<number, number>(async (_key, items) => items.slice(1), 10);
    const s = await Promise.allSettled([1, 2].map((i) => short.submit('k', i)));
    expect(s.every((x) => x.status === 'rejected' && /answered 1 of 2/.test(x.reason.message))).toBe(true);
    expect(() => createKeyedGatherer(async () => [], 0)).toThrow(/batch limit/);
    const held = g.submit('slow', 1);
    const failed = g.submit('boom', 2);
    expect(await g.submit('fast', 3)).toBe(3);
    await expect(failed).rejects.toThrow('down');
    releaseSlow();
    expect(await held).toBe(1);
  });
});
