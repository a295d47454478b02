// The batch commit finds its parcels by key whatever the statistics say (found
// on 2026-11-26, bench:parcels: a join left to the planner read every
// unbatched parcel through the batch_id index, or the whole table, for each
// commit); the batch_id index leaves the waiting parcels out, and the
// migration that made it so does not deadlock with a batch commit.
import { cpSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/core/logger.js';
import { MIGRATIONS_DIR, migrate, readMigrations } from '../../../src/core/migrate.js';
import { createParcelsRepository } from '../../../src/modules/parcels/parcels.repository.js';
import { commitBatchesQuery } from '../../../src/modules/parcels/sql/commit-batches.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';

const PARTIAL_BATCH_ID = '20261126010000_parcels_batch_id_partial';
let tdb: TestDb;
const others: TestDb[] = [];
beforeAll(async () => {
  tdb = await createTestDb('parcels_plans');
});
afterAll(async () => {
  await tdb.drop();
  for (const d of others) await d.drop();
});

/** Inserts `n` WAITING parcels of area PL-1 named `<prefix>-<i>`. */
async function waiting(prefix: string, n: number): Promise<string[]> {
  const trackingNos = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  await createParcelsRepository(tdb.db).insertParcels(trackingNos.map((trackingNo) => ({ client: 'default', trackingNo, areaCode: 'PL-1' })));
  return trackingNos;
}

type PlanNode = { 'Node Type'?: string; 'Relation Name'?: string; 'Index Name'?: string; Plans?: PlanNode[]; Plan?: PlanNode };

/** Every node of an EXPLAIN (FORMAT JSON) answer. */
function planNodes(explained: unknown): PlanNode[] {
  const out: PlanNode[] = [];
  const walk = (n: PlanNode) => {
    out.push(n);
    if (n.Plan) walk(n.Plan);
    for (const c of n.Plans ?? []) walk(c);
  };
  for (const top of explained as PlanNode[]) walk(top);
  return out;
}

describe('parcel indexes and plans', () => {
  it('finds the parcels of a batch commit by their key, on stale statistics', async () => {
    await tdb.db.area.create({ data: { code: 'PL-1', vehiclePlate: 'PL-1', sorterContact: 'pl@example.com' } });
    // Statistics taken with a few parcels, then thousands more (a burst before autoanalyze; the build
    // machine runs PostgreSQL with autovacuum off).
    await waiting('OLD', 50);
    await tdb.db.$executeRawUnsafe('ANALYZE parcels');
    const trackingNos = await waiting('NEW', 5_000);
    const batches = Array.from({ length: 20 }, (_, b) => ({
      id: `00000000-0000-4000-8000-${String(b).padStart(12, '0')}`,
      client: 'default',
      areaCode: 'PL-1',
      trackingNos: trackingNos.slice(b * 10, b * 10 + 10),
    }));
    const q = commitBatchesQuery(batches, 'FULL', { maxWaitMs: 60_000, batchSize: 10 });
    const [row] = await tdb.db.$queryRaw<{ 'QUERY PLAN': unknown }[]>`EXPLAIN (FORMAT JSON) ${q.sql}`;
    const nodes = planNodes(row?.['QUERY PLAN']);
    // Each node that reads parcels, with the index it reads them by (a bitmap scan's is its child's).
    const onParcels = nodes
      .filter((n) => n['Relation Name'] === 'parcels')
      .map((n) => `${n['Node Type']} ${[n['Index Name'], ...(n.Plans ?? []).map((c) => c['Index Name'])].filter(Boolean).join(' ')}`.trim());
    expect(onParcels.length).toBeGreaterThan(0);
    // The lookups, and the UPDATE's rows found again, by key only.
    const byKey = ['Index Scan parcels_pkey', 'Bitmap Heap Scan parcels_pkey', 'ModifyTable'];
    expect(onParcels.filter((n) => !byKey.includes(n))).toEqual([]);
  });

  it('keeps the waiting parcels out of the batch_id index', async () => {
    const [idx] = await tdb.db.$queryRawUnsafe<{ def: string }[]>(`SELECT indexdef AS def FROM pg_indexes WHERE indexname = 'parcels_batch_id_idx'`);
    expect(idx?.def).toMatch(/WHERE \(batch_id IS NOT NULL\)/);
  });

  it('moves to the partial batch_id index while a batch commit comes in, without a deadlock (found by a review, 2026-11-26)', async () => {
    const d = await createTestDb('parcels_mig', { migrate: false });
    others.push(d);
    const log = createLogger('silent');
    // The migrations before this one, then parcels; then this one alone (the schema of then: no clients yet).
    const upTo = (last: (name: string) => boolean) => {
      const dir = mkdtempSync(join(tmpdir(), 'ots-migrations-'));
      for (const m of readMigrations().filter((m) => last(m.name))) cpSync(join(MIGRATIONS_DIR, m.name), join(dir, m.name), { recursive: true });
      return dir;
    };
    await migrate(
      d.url,
      log,
      upTo((name) => name < PARTIAL_BATCH_ID),
    );
    await d.db.$executeRawUnsafe(`INSERT INTO areas (code, vehicle_plate, sorter_contact) VALUES ('PM-1', 'PM-1', 'pm@example.com')`);
    await d.db.$executeRawUnsafe(`INSERT INTO parcels (tracking_no, area_code) SELECT unnest(ARRAY['PM-A', 'PM-B', 'PM-C', 'PM-D']), 'PM-1'`);
    const waiting = async (mode: string) =>
      (
        await d.db.$queryRawUnsafe<{ n: number }[]>(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'parcels' AND NOT l.granted AND l.mode = $1`,
          mode,
        )
      )[0]?.n ?? 0;
    // A writer holds the table, so the migration waits for it...
    const writer = new pg.Client({ connectionString: d.url });
    await writer.connect();
    try {
      await writer.query(`BEGIN; UPDATE parcels SET created_at = created_at WHERE tracking_no = 'PM-D'`);
      const migrating = migrate(
        d.url,
        log,
        upTo((name) => name <= PARTIAL_BATCH_ID),
      );
      expect(await waitFor(async () => (await waiting('ExclusiveLock')) + (await waiting('ShareLock')) === 1, 20_000, 20)).toBe(true);
      // ...a batch commit comes in behind it (one statement as the commit of then: its parcels
      // locked by key, then attached, beside the new batch), and then the writer ends. (A Prisma
      // query runs once awaited: then() sends it now.)
      const committing = d.db
        .$executeRawUnsafe(
          `WITH found AS (
           SELECT tracking_no FROM parcels WHERE tracking_no = ANY(ARRAY['PM-A', 'PM-B', 'PM-C']) AND batch_id IS NULL ORDER BY tracking_no FOR UPDATE
         ), b AS (
           INSERT INTO batches (id, area_code, vehicle_plate, reason, parcel_count, created_at)
           SELECT '00000000-0000-4000-8000-0000000000aa', 'PM-1', 'PM-1', 'FULL', count(*), now() FROM found
           RETURNING id
         )
         UPDATE parcels SET batch_id = b.id, status = 'BATCHED', batched_at = now() FROM b WHERE parcels.tracking_no IN (SELECT tracking_no FROM found)`,
        )
        .then((n) => n);
      expect(await waitFor(async () => (await waiting('RowShareLock')) + (await waiting('RowExclusiveLock')) === 1, 20_000, 20)).toBe(true);
      await writer.query('COMMIT');
      expect(await migrating).toEqual([PARTIAL_BATCH_ID]);
      expect(await committing).toBe(3);
    } finally {
      await writer.end();
    }
    const [idx] = await d.db.$queryRawUnsafe<{ def: string }[]>(`SELECT indexdef AS def FROM pg_indexes WHERE indexname = 'parcels_batch_id_idx'`);
    expect(idx?.def).toMatch(/WHERE \(batch_id IS NOT NULL\)/);
  });
});
