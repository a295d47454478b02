// PUT /areas/:code racing itself: every PUT is answered 200 (a new area
// created by two at once included), each gets its own rule version in commit
// order, and the Redis group ends with the rule the database ends with.
import { describe, expect, it } from 'vitest';
import { useParcelsService } from './parcels.harness.js';

const h = useParcelsService('parcels_review_put', { PARCEL_BATCH_SIZE: '10', PARCEL_MAX_WAIT_SECONDS: '600' }, 'api');

const areaRow = (code: string) => h.tdb.db.area.findUniqueOrThrow({ where: { client_code: { client: 'default', code } } });

async function race(code: string, n: number) {
  const answers = await Promise.all(Array.from({ length: n }, (_, i) => h.putArea(code, { batchSize: i + 2, maxWaitSeconds: 100 + i }).then((r) => r)));
  const row = await areaRow(code);
  const redis = (await h.batcher().rules(0)).get(code);
  return { statuses: answers.map((a) => a.status), bodies: answers.map((a) => a.body as Record<string, unknown>), row, redis };
}

describe('PUTs of one area racing', () => {
  it('create a new area: every one answered 200, one version each', async () => {
    for (let round = 0; round < 5; round++) {
      const { statuses, bodies, row, redis } = await race(`PR-NEW-${round}`, 8);
      if (statuses.some((s) => s !== 200))
        console.log(
          `round ${round}:`,
          statuses,
          bodies.filter((b) => b.status),
        );
      expect(statuses).toEqual(Array(8).fill(200));
      expect(row.ruleVersion).toBe(8);
      expect(redis).toEqual({ batchSize: row.batchSize, maxWaitMs: (row.maxWaitSeconds as number) * 1_000, version: row.ruleVersion });
    }
  });

  it('replace an existing area: Redis ends with the database rule', async () => {
    await h.area('PR-OLD');
    for (let round = 0; round < 5; round++) {
      const { statuses, row, redis } = await race('PR-OLD', 8);
      expect(statuses).toEqual(Array(8).fill(200));
      expect(redis).toEqual({ batchSize: row.batchSize, maxWaitMs: (row.maxWaitSeconds as number) * 1_000, version: row.ruleVersion });
    }
  });
});
