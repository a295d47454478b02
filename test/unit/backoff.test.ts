import { describe, expect, it } from 'vitest';
import { retryDelayMs } from '../../src/queue/backoff.js';

describe('retryDelayMs', () => {
  const exp = { kind: 'exponential', baseMs: 100, maxMs: 1_000, jitter: 0 } as const;

  it('doubles per attempt up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6].map((a) => retryDelayMs(exp, a))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
  });

  it('scales by a jitter factor in [1 - jitter, 1]', () => {
    const p = { ...exp, jitter: 0.5 };
    expect(retryDelayMs(p, 1, () => 0)).toBe(100);
    expect(retryDelayMs(p, 1, () => 0.999999)).toBe(50);
    for (let i = 0; i < 200; i++) {
      const d = retryDelayMs(p, 3);
      expect(d).toBeGreaterThanOrEqual(200);
      expect(d).toBeLessThanOrEqual(400);
    }
  });

  it('follows explicit steps and repeats the last one', () => {
    const steps = { kind: 'steps', delaysMs: [5_000, 10_000, 30_000, 60_000], jitter: 0 } as const;
    expect([1, 2, 3, 4, 5, 9].map((a) => retryDelayMs(steps, a))).toEqual([5_000, 10_000, 30_000, 60_000, 60_000, 60_000]);
  });
});
