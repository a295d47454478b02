// The parcels' reconciliation pass: what its own commit refuses and puts
// back stays in Redis (only the parcels it batched leave), and the waiting
// parcels it puts back are read by keyset a page at a time, a bounded number
// a pass, each pass going on from where the last one stopped.
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/core/logger.js';
import { createParcelsReconcile } from '../../../src/modules/parcels/parcels.reconcile.js';
import { createParcelsRepository } from '../../../src/modules/parcels/parcels.repository.js';
import type { ParcelsService } from '../../../src/modules/parcels/parcels.service.js';
import { useParcelsService } from './parcels.harness.js';
import { expectBatchRules } from './parcels.invariants.js';

// The API role: no flusher takes what the pass leaves in Redis before the test looks.
const h = useParcelsService('parcels_reconcile', { PARCEL_BATCH_SIZE: '10', PARCEL_MAX_WAIT_SECONDS: '600' }, 'api');
const log = createLogger('silent');

/** Parcels of the default client written straight into the database (not in Redis), taken in `agoMs` before now, 1 ms apart. */
async function waiting(area: string, names: readonly string[], agoMs: number): Promise<void> {
  for (const [i, t] of names.entries()) {
    await h.tdb.db.$executeRaw`INSERT INTO parcels (tracking_no, area_code, status, created_at)
      VALUES (${t}, ${area}, 'WAITING', now() - make_interval(secs => ${agoMs - i}::double precision / 1000))`;
  }
}

/** A pass over the module's own service and batcher, with a repository of `db`'s (wrapped by `wrap`) and its own bounds. */
function pass(o: { wrap?: (r: ReturnType<typeof createParcelsRepository>) => ReturnType<typeof createParcelsRepository>; perPass?: number; page?: number }) {
  const repo = createParcelsRepository(h.tdb.db);
  const m = h.module() as ReturnType<typeof h.module> & { service: ParcelsService };
  return createParcelsReconcile({
    repo: o.wrap ? o.wrap(repo) : repo,
    service: m.service,
    batcher: m.batcher,
    log,
    graceMs: 0,
    everyMs: 3_600_000,
    ...(o.perPass !== undefined && { regroupPerPass: o.perPass }),
    ...(o.page !== undefined && { regroupPage: o.page }),
  });
}

describe('the reconciliation pass', () => {
  it('puts waiting parcels back a page at a time, a bounded number a pass, the next pass going on from there', async () => {
    await h.area('RC-P');
    const names = ['RCP-1', 'RCP-2', 'RCP-3', 'RCP-4', 'RCP-5', 'RCP-6', 'RCP-7'];
    await waiting('RC-P', names, 10_000);
    const r = pass({ perPass: 3, page: 2 });
    const held = async () => {
      const out: string[] = [];
      for (const t of names) if (await h.inGroup('RC-P', t)) out.push(t);
      return out;
    };
    expect((await r.run()).regrouped).toBe(3);
    expect(await held()).toEqual(['RCP-1', 'RCP-2', 'RCP-3']);
    expect((await r.run()).regrouped).toBe(3);
    expect(await held()).toEqual(names.slice(0, 6));
    // The end: one left, and the next pass starts from the oldest again.
    expect((await r.run()).regrouped).toBe(1);
    expect(await held()).toEqual(names);
    await h.batcher().remove('RC-P', names); // Redis loses them all
    expect((await r.run()).regrouped).toBe(3);
    expect(await held()).toEqual(['RCP-1', 'RCP-2', 'RCP-3']);
    expect((await h.batcher().waiting('RC-P')).count).toBe(3);
    await h.flush('RC-P').expect(200);
  });

  it('leaves in Redis what its own refused commit put back (only what it batched leaves)', async () => {
    await h.area('RC-R');
    const names = ['RCR-1', 'RCR-2', 'RCR-3', 'RCR-4', 'RCR-5', 'RCR-6', 'RCR-7'];
    // Overdue by the area's wait (600 s), in no Redis group (lost).
    await waiting('RC-R', names, 1_200_000);
    // The area's size goes down to 5 between the pass's read (one chunk of 7 by the size 10 it read) and its commit:
    // the TIMEOUT commit refuses the 7, puts them back (the 5 oldest then a FULL batch), and 2 are left in the group.
    const r = pass({
      wrap: (repo) => ({
        ...repo,
        listOverdue: async (rule, limit) => {
          const found = await repo.listOverdue(rule, limit);
          if (found.some((p) => p.areaCode === 'RC-R')) await h.area('RC-R', { batchSize: 5 });
          return found;
        },
      }),
    });
    const result = await r.run();
    expect([result.parcels, result.batches]).toEqual([7, 0]);
    const full = await h.batchesOf('RC-R');
    expect(full.map((b) => [b.reason, b.parcelCount])).toEqual([['FULL', 5]]);
    // The two left over wait in their group (past its deadline: the flusher's next take), not dropped from Redis
    // to wait for the next pass an hour away.
    expect([await h.inGroup('RC-R', 'RCR-6'), await h.inGroup('RC-R', 'RCR-7')]).toEqual([true, true]);
    expect(await h.batcher().waiting('RC-R')).toMatchObject({ count: 2 });
    await h.flush('RC-R').expect(200);
    expect(await expectBatchRules(h.tdb, { 'RC-R': 5 })).toEqual({ FULL: 1, MANUAL: 1 });
  });
});
