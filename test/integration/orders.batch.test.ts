// Concurrent creates share one INSERT: each order still gets its own items and
// times, and a row that fails the shared statement fails alone.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isUniqueViolation } from '../../src/core/db-errors.js';
import { type NewOrder, createOrdersRepository } from '../../src/modules/orders/orders.repository.js';
import { gatherInserts } from '../../src/modules/orders/orders.service.js';
import { createTestDb, type TestDb } from '../helpers/db.js';

let tdb: TestDb;
beforeAll(async () => {
  tdb = await createTestDb('orders_batch');
});
afterAll(async () => {
  await tdb?.drop();
});

const order = (n: number, key: string | null = null): NewOrder => ({
  id: randomUUID(),
  customerId: `c${n}`,
  currency: 'EUR',
  totalCents: n * 100,
  timeoutSeconds: 60 + n,
  idempotencyKey: key,
  requestHash: key ? 'h'.repeat(64) : null,
  items: Array.from({ length: (n % 3) + 1 }, (_, i) => ({ sku: `s${n}-${i}`, quantity: i + 1, unitPriceCents: n })),
});

describe('batched order inserts', () => {
  it('inserts many orders in one statement, each with its items, answered in input order', async () => {
    const repo = createOrdersRepository(tdb.db);
    const input = Array.from({ length: 12 }, (_, n) => order(n));
    const rows = await repo.insertMany(input);
    expect(rows.map((r) => r.id)).toEqual(input.map((o) => o.id));
    // One statement: one transaction, one now().
    expect(new Set(rows.map((r) => r.createdAt.getTime())).size).toBe(1);
    for (const [n, r] of rows.entries()) {
      expect(r.expiresAt.getTime() - r.createdAt.getTime()).toBe((60 + n) * 1_000);
      const stored = await repo.find(r.id);
      expect(stored?.items).toEqual(input[n]!.items);
      expect(stored?.totalCents).toBe(n * 100);
    }
  });

  it('lets one failing row fail alone when creates of one turn share a batch, the first of a key winning', async () => {
    const inserts = gatherInserts(createOrdersRepository(tdb.db));
    // The row-by-row retry runs rows side by side; repeated, so that a retry
    // racing the two rows of one key would show which one won.
    for (let round = 0; round < 10; round++) {
      const key = `dup-${randomUUID()}`;
      const batch = [order(1), order(2, key), order(3), order(4, key), order(5)];
      const r = await Promise.allSettled(batch.map((o) => inserts.submit(o)));
      expect(r.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
      expect(isUniqueViolation((r[3] as PromiseRejectedResult).reason)).toBe(true);
      const stored = await tdb.db.order.findMany({ where: { id: { in: batch.map((o) => o.id) } } });
      expect(stored.map((o) => o.id).sort()).toEqual([batch[0]!.id, batch[1]!.id, batch[2]!.id, batch[4]!.id].sort());
    }
  });
});
