import { describe, expect, it } from 'vitest';
import { createServerClock } from '../../src/queue/wake/server-clock.js';

describe('server clock estimate', () => {
  it('follows the fastest round trip, not a slow one', () => {
    const c = createServerClock();
    // Server is exactly 1 000 000 ms ahead of local; samples with 1 ms and 40 ms round trips.
    c.sample(1_000_000 + 100, 99.5, 100.5);
    c.sample(1_000_000 + 230, 200, 240); // slow: the reply was late, the midpoint is off by ~10 ms
    expect(c.localAt(1_000_000 + 500)).toBeCloseTo(499.5, 0);
    c.sample(1_000_000 + 300, 299.6, 300.4); // a faster one replaces the best
    expect(c.localAt(1_000_000 + 500)).toBeCloseTo(499.5, 0);
  });
});
