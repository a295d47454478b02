// The reconciliation pass puts waiting parcels back into their groups from a
// page it read earlier: a parcel withdrawn or moved between the read and the
// put back must not be left in the group of the area it left (the pass must
// mend Redis toward the database, not away from it).
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/core/logger.js';
import { createParcelsReconcile } from '../../../src/modules/parcels/parcels.reconcile.js';
import { createParcelsRepository } from '../../../src/modules/parcels/parcels.repository.js';
import type { ParcelsService } from '../../../src/modules/parcels/parcels.service.js';
import { useParcelsService } from './parcels.harness.js';

const h = useParcelsService('parcels_review_stale', { PARCEL_BATCH_SIZE: '10', PARCEL_MAX_WAIT_SECONDS: '600' }, 'api');
const log = createLogger('silent');

/** Parcels of the default client written straight into the database (not in Redis), taken in `agoMs` before now, 1 ms apart. */
async function waiting(area: string, names: readonly string[], agoMs: number): Promise<void> {
  for (const [i, t] of names.entries()) {
    await h.tdb.db.$executeRaw`INSERT INTO parcels (tracking_no, area_code, status, created_at)
      VALUES (${t}, ${area}, 'WAITING', now() - make_interval(secs => ${agoMs - i}::double precision / 1000))`;
  }
}

/** A pass whose page read is followed, before its put back, by `between`. */
function pass(between: () => Promise<void>) {
  const repo = createParcelsRepository(h.tdb.db);
  const m = h.module() as ReturnType<typeof h.module> & { service: ParcelsService };
  let done = false;
  return createParcelsReconcile({
    repo: {
      ...repo,
      listRecentWaiting: async (...args: Parameters<typeof repo.listRecentWaiting>) => {
        const page = await repo.listRecentWaiting(...args);
        if (!done && page.length > 0) {
          done = true;
          await between();
        }
        return page;
      },
    },
    service: m.service,
    batcher: m.batcher,
    log,
    graceMs: 0,
    everyMs: 3_600_000,
  });
}

describe('a reconciliation pass racing a withdraw and a move', () => {
  it('leaves neither the withdrawn nor the moved parcel in the group of the area it left', async () => {
    await h.area('RS-A');
    await h.area('RS-B');
    await waiting('RS-A', ['RSA-W', 'RSA-M', 'RSA-K'], 10_000);
    const r = pass(async () => {
      expect((await h.withdraw('RSA-W')).body).toMatchObject({ status: 'WITHDRAWN' });
      expect((await h.move('RSA-M', { area: 'RS-B' })).body).toMatchObject({ status: 'WAITING', area: 'RS-B' });
    });
    await r.run();
    const where = async () => ({
      'RSA-W in RS-A': await h.inGroup('RS-A', 'RSA-W'),
      'RSA-M in RS-A': await h.inGroup('RS-A', 'RSA-M'),
      'RSA-M in RS-B': await h.inGroup('RS-B', 'RSA-M'),
      'RSA-K in RS-A': await h.inGroup('RS-A', 'RSA-K'),
    });
    const after = await where();
    console.log('after the pass:', after, 'RS-A waiting in Redis:', await h.batcher().waiting('RS-A'));
    // A second pass (nothing in between) does not mend it either.
    await r.run();
    console.log('after a second pass:', await where(), 'RS-A waiting in Redis:', await h.batcher().waiting('RS-A'));
    expect(after).toEqual({ 'RSA-W in RS-A': false, 'RSA-M in RS-A': false, 'RSA-M in RS-B': true, 'RSA-K in RS-A': true });
  });
});
