// A worker over a sharded queue claims from every shard in turn: with a
// backlog on all shards and little room in its pool, no shard waits while
// another is served again and again.
import { afterEach, describe, expect, it } from 'vitest';
import { shardOf } from '../../../src/queue/keys.js';
import { type Harness, harness } from '../../helpers/queues.js';
import { waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

describe('fair claims across shards', () => {
  it('serves every backlogged shard while the pool is the bottleneck', async () => {
    const shards = 4;
    h = harness('fair', { t: {} }, shards);
    const perShard = 200;
    // perShard due jobs on each shard (ids picked by their hash).
    const ids: string[] = [];
    const count = new Array<number>(shards).fill(0);
    for (let i = 0; ids.length < perShard * shards; i++) {
      const id = `f${i}`;
      const s = shardOf(id, shards);
      if (count[s]! < perShard) {
        count[s]!++;
        ids.push(id);
      }
    }
    await h.queue.scheduleMany(ids.map((id) => ({ id, type: 't', delayMs: 0 })));
    const order: number[] = [];
    await h.startWorker(
      {
        t: async (job) => {
          order.push(job.shard);
          await new Promise((r) => setTimeout(r, 1));
        },
      },
      { concurrency: 4, prefetch: 4 },
    );
    expect(await waitFor(() => order.length >= perShard, 20_000, 5)).toBe(true);
    // In the first quarter of the work every shard was served, none more than
    // twice its fair share.
    const first = order.slice(0, perShard);
    const served = Array.from({ length: shards }, (_, s) => first.filter((x) => x === s).length);
    for (const n of served) {
      expect(n).toBeGreaterThan(0);
      expect(n).toBeLessThanOrEqual((2 * perShard) / shards);
    }
  });
});
