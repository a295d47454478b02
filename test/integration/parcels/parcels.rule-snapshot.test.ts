// A batch commit that waits on a parcel's lock (another committer, a
// withdraw or a move holds it) while a PUT lowers the area's batch size: the
// commit must judge its batch by the rule in force when it makes the batch,
// not by the one its statement's snapshot saw before the PUT committed and
// was answered.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/redis.js';
import { useParcelsService } from './parcels.harness.js';
import { expectBatchRules } from './parcels.invariants.js';

// The API role: no flusher runs; only the FULL add and the manual flush commit here.
const h = useParcelsService('parcels_review_snap', { PARCEL_BATCH_SIZE: '10', PARCEL_MAX_WAIT_SECONDS: '600' }, 'api');

/** Holds `trackingNo`'s row lock in a transaction of its own until `release` is called. */
async function holdParcel(trackingNo: string) {
  const c = new pg.Client({ connectionString: h.tdb.url });
  await c.connect();
  await c.query('BEGIN');
  await c.query(`SELECT 1 FROM parcels WHERE client = 'default' AND tracking_no = $1 FOR UPDATE`, [trackingNo]);
  const waiting = async () =>
    (
      await c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
      )
    ).rows[0]!.n > 0;
  return {
    waiting,
    release: async () => {
      await c.query('ROLLBACK');
      await c.end();
    },
  };
}

describe('a batch commit waiting on a parcel lock while a PUT lowers the size', () => {
  it('FULL (the add): makes no batch above the size the PUT set and answered before the batch was made', async () => {
    await h.area('SN-1', { batchSize: 4 });
    for (const t of ['SN1-1', 'SN1-2', 'SN1-3']) await h.post(t, 'SN-1').expect(202);
    const lock = await holdParcel('SN1-1');
    // The fourth fills the group: the add takes the batch of 4, its commit waits for SN1-1.
    const fourth = h.post('SN1-4', 'SN-1').then((r) => r);
    expect(await waitFor(lock.waiting, 5_000, 20)).toBe(true);
    expect((await h.putArea('SN-1', { batchSize: 2 })).status).toBe(200);
    await lock.release();
    expect((await fourth).status).toBe(202);
    await waitFor(async () => (await h.tdb.db.parcel.count({ where: { areaCode: 'SN-1', status: 'WAITING' } })) === 0, 3_000, 50);
    const made = await h.batchesOf('SN-1');
    console.log('SN-1 batches after the PUT to size 2:', made.map((b) => `${b.reason} ${b.parcels.length}`).join(', '));
    await expectBatchRules(h.tdb, { 'SN-1': 2 });
  });

  it('MANUAL (a flush): takes no more than the size the PUT set and answered before the batch was made', async () => {
    await h.area('SN-2', { batchSize: 4 });
    for (const t of ['SN2-1', 'SN2-2', 'SN2-3']) await h.post(t, 'SN-2').expect(202);
    // Out of Redis (lost there, or in a take in flight): the PUT's own call then takes nothing
    // and is answered while the flush waits; the flush reads the database.
    await h.batcher().remove('SN-2', ['SN2-1', 'SN2-2', 'SN2-3']);
    const lock = await holdParcel('SN2-1');
    const flushed = h.flush('SN-2').then((r) => r);
    expect(await waitFor(lock.waiting, 5_000, 20)).toBe(true);
    expect((await h.putArea('SN-2', { batchSize: 2 })).status).toBe(200);
    await lock.release();
    const res = await flushed;
    console.log('SN-2 flush after the PUT to size 2:', res.status, res.body.parcels);
    await expectBatchRules(h.tdb, { 'SN-2': 2 });
  });
});
