// The batch commit finds its parcels by key whatever the statistics say (found
// on 2026-11-26, bench:parcels: a join left to the planner read every
// unbatched parcel through the batch_id index, or the whole table, for each
// commit), and the batched parcels' index leaves the waiting ones out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commitBatchesQuery, createParcelsRepository } from '../../src/modules/parcels/parcels.repository.js';
import { createTestDb, type TestDb } from '../helpers/db.js';

let tdb: TestDb;
beforeAll(async () => {
  tdb = await createTestDb('parcels_plans');
});
afterAll(async () => tdb.drop());

/** Inserts `n` WAITING parcels of area PL-1 named `<prefix>-<i>`. */
async function waiting(prefix: string, n: number): Promise<string[]> {
  const trackingNos = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  await createParcelsRepository(tdb.db).insertParcels(trackingNos.map((trackingNo) => ({ trackingNo, areaCode: 'PL-1' })));
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

describe('parcel plans on stale statistics', () => {
  it('finds the parcels of a batch commit by their key', async () => {
    await tdb.db.area.create({ data: { code: 'PL-1', vehiclePlate: 'PL-1', sorterContact: 'pl@example.com' } });
    // Statistics taken with a few parcels, then thousands more (a burst before autoanalyze; the build
    // machine runs PostgreSQL with autovacuum off).
    await waiting('OLD', 50);
    await tdb.db.$executeRawUnsafe('ANALYZE parcels');
    const trackingNos = await waiting('NEW', 5_000);
    const batches = Array.from({ length: 20 }, (_, b) => ({
      id: `00000000-0000-4000-8000-${String(b).padStart(12, '0')}`,
      areaCode: 'PL-1',
      trackingNos: trackingNos.slice(b * 10, b * 10 + 10),
    }));
    const q = commitBatchesQuery(batches, 'FULL', { maxWaitMs: 60_000, batchSize: 10 });
    const [row] = await tdb.db.$queryRawUnsafe<{ 'QUERY PLAN': unknown }[]>(`EXPLAIN (FORMAT JSON) ${q.sql}`, ...q.params);
    const nodes = planNodes(row?.['QUERY PLAN']);
    const onParcels = nodes.filter((n) => n['Relation Name'] === 'parcels').map((n) => `${n['Node Type']} ${n['Index Name'] ?? ''}`.trim());
    expect(onParcels.length).toBeGreaterThan(0);
    // The lookups, and the UPDATE's rows found again, by key only.
    expect(onParcels.filter((n) => n !== 'Index Scan parcels_pkey' && n !== 'ModifyTable')).toEqual([]);
  });

  it('keeps the waiting parcels out of the batch_id index', async () => {
    const [idx] = await tdb.db.$queryRawUnsafe<{ def: string }[]>(`SELECT indexdef AS def FROM pg_indexes WHERE indexname = 'parcels_batch_id_idx'`);
    expect(idx?.def).toMatch(/WHERE \(batch_id IS NOT NULL\)/);
  });
});
