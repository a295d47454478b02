// Concurrent creates share one INSERT: each order still gets its own items and
// times, and a row that fails the shared statement fails alone. Expiries are
// cancelled in batches by one statement, each order still judged on its own.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isUniqueViolation } from '../../../src/core/db-errors.js';
import { createLogger } from '../../../src/core/logger.js';
import { ordersJobHandlers } from '../../../src/modules/orders/orders.jobs.js';
import { type NewOrder, createOrdersRepository } from '../../../src/modules/orders/orders.repository.js';
import { cancelOverdueSql, expireManySql } from '../../../src/modules/orders/sql/cancel.js';
import { Prisma } from '../../../src/generated/prisma/client.js';
import { EXPIRE_JOB, createOrdersService, expireJobId, expirePayload, gatherInserts } from '../../../src/modules/orders/orders.service.js';
import { NonRetryableError, createQueue, type BatchContext, type Job, type JobBatchHandler } from '../../../src/queue/index.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { gate } from '../../helpers/queues.js';
import { redisClient, uniqueQueueName } from '../../helpers/redis.js';

let tdb: TestDb;
const redis = redisClient('orders-batch');
beforeAll(async () => {
  tdb = await createTestDb('orders_batch');
});
afterAll(async () => {
  redis.disconnect();
  await tdb?.drop();
});

const order = (n: number, key: string | null = null): NewOrder => ({
  id: randomUUID(),
  client: 'default',
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
      const stored = await repo.find('default', r.id);
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

describe('batched expiries', () => {
  const due = async (repo: ReturnType<typeof createOrdersRepository>, n: number, timeoutSeconds: number) =>
    repo.insertMany(Array.from({ length: n }, (_, i) => ({ ...order(i), timeoutSeconds })));

  it('cancels the due unpaid orders of a batch in one statement and answers for every order', async () => {
    const repo = createOrdersRepository(tdb.db);
    const [a, b] = await due(repo, 2, 0);
    const [paid, open] = await due(repo, 2, 3_600);
    expect(await repo.pay('default', paid!.id, 'ref')).not.toBeNull();
    const unknown = randomUUID();
    const out = await repo.expireMany([a!.id, b!.id, paid!.id, open!.id, unknown, a!.id]);
    expect(out.get(a!.id)).toMatchObject({ kind: 'cancelled', notificationId: expect.any(String) });
    expect(out.get(b!.id)).toMatchObject({ kind: 'cancelled', notificationId: expect.any(String) });
    expect(out.get(paid!.id)).toEqual({ kind: 'settled' });
    expect(out.get(unknown)).toEqual({ kind: 'settled' });
    const notDue = out.get(open!.id);
    expect(notDue?.kind).toBe('not_due');
    expect(notDue?.kind === 'not_due' && notDue.inMs).toBeGreaterThan(3_500_000);
    expect(await tdb.db.order.count({ where: { id: { in: [a!.id, b!.id] }, status: 'CANCELLED', cancelReason: 'PAYMENT_TIMEOUT' } })).toBe(2);
    expect(await tdb.db.order.findUnique({ where: { id: paid!.id } })).toMatchObject({ status: 'PAID' });
    expect(await tdb.db.order.findUnique({ where: { id: open!.id } })).toMatchObject({ status: 'UNPAID' });
    // Again (a redelivered batch): nothing changes, no second notification.
    const again = await repo.expireMany([a!.id, b!.id]);
    expect([...again.values()]).toEqual([{ kind: 'settled' }, { kind: 'settled' }]);
    expect(await tdb.db.notification.count({ where: { orderId: { in: [a!.id, b!.id] } } })).toBe(2);
  });

  it('gives a job naming no order its own failure and the rest their outcomes; the job id names the order', async () => {
    const repo = createOrdersRepository(tdb.db);
    const [a] = await due(repo, 1, 0);
    const [open] = await due(repo, 1, 3_600);
    const dispatched: string[] = [];
    const service = createOrdersService({
      repo,
      queue: createQueue(redis, { name: uniqueQueueName('orders-batch'), types: {} }),
      dispatch: async (ids) => void dispatched.push(...ids),
      log: createLogger('silent'),
      defaultTimeoutSeconds: 60,
      maxWindowSeconds: 604_800,
      reminderBeforeSeconds: undefined,
    });
    const handler = ordersJobHandlers(service, createLogger('silent'))[EXPIRE_JOB] as JobBatchHandler;
    const job = (id: string, payload: unknown): Job => ({
      queue: 'q',
      shard: 0,
      id,
      type: EXPIRE_JOB,
      payload,
      attempts: 1,
      maxAttempts: 5,
      lastAttempt: false,
      dueAt: Date.now(),
      token: 1,
    });
    const outcomes = await handler.batch(
      [
        // A payload naming an order does not make the job name one: the id does.
        job('bad', { orderId: a!.id }),
        job(expireJobId(a!.id), expirePayload()),
        job(expireJobId(open!.id), expirePayload()),
        job(expireJobId(a!.id.toUpperCase()), {}),
        job('order:not-a-uuid:expire', {}),
        job(`order:${a!.id}:expire:x`, {}),
      ],
      {} as BatchContext, // the handler uses none of it
    );
    expect(outcomes[0]).toMatchObject({ error: expect.any(NonRetryableError) });
    expect(outcomes[1]).toBeUndefined();
    expect(outcomes[2]).toMatchObject({ retryInMs: expect.any(Number) });
    expect(outcomes[3]).toBeUndefined();
    expect(outcomes[4]).toMatchObject({ error: expect.any(NonRetryableError) });
    expect(outcomes[5]).toMatchObject({ error: expect.any(NonRetryableError) });
    expect(dispatched).toHaveLength(1);
    expect(await tdb.db.notification.findMany({ where: { orderId: a!.id }, select: { id: true } })).toEqual([{ id: dispatched[0] }]);
  });

  it('skips the orders a pay committed while the batch waited for their rows, and cancels the rest', async () => {
    const repo = createOrdersRepository(tdb.db);
    const orders = await due(repo, 40, 1);
    const ids = orders.map((o) => o.id);
    const payIds = ids.filter((_, i) => i % 2 === 0);
    const committing = gate();
    const payLocked = gate();
    // A pay of half of them, inside the window, holding its rows until the test lets it commit.
    const paying = tdb.db.$transaction(
      async (tx) => {
        const n = await tx.$executeRaw`
          UPDATE orders SET status = 'PAID', paid_at = now() WHERE id = ANY(${payIds}::uuid[]) AND status = 'UNPAID' AND expires_at > now()`;
        payLocked.open();
        await committing.promise;
        return n;
      },
      { timeout: 20_000 },
    );
    await payLocked.promise;
    const deadline = Math.max(...orders.map((o) => o.expiresAt.getTime()));
    await new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now()) + 50));
    let answered = false;
    const expiring = repo.expireMany(ids).finally(() => (answered = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(answered).toBe(false); // it waits for the paid rows
    committing.open();
    expect(await paying).toBe(payIds.length);
    const out = await expiring;
    for (const id of ids) expect(out.get(id)?.kind).toBe(payIds.includes(id) ? 'settled' : 'cancelled');
    const rows = await tdb.db.order.findMany({ where: { id: { in: ids } }, select: { id: true, status: true } });
    for (const r of rows) expect(r.status).toBe(payIds.includes(r.id) ? 'PAID' : 'CANCELLED');
    const notes = await tdb.db.notification.findMany({ where: { orderId: { in: ids } }, select: { orderId: true } });
    expect(notes.map((n) => n.orderId).sort()).toEqual(ids.filter((id) => !payIds.includes(id)).sort());
  });
});

describe('plans on stale statistics', () => {
  // Statistics taken when no order was UNPAID, then thousands UNPAID (a flash
  // sale's burst before autoanalyze): the planner, told few rows match
  // `status = 'UNPAID'`, read every UNPAID order through the status index for
  // each statement (bench:history's kept database: 245 ms a batch of 300).
  it('finds the orders of an expiry batch by their ids and the pass its page by the status index, once', async () => {
    const own = await createTestDb('orders_plans');
    try {
      const repo = createOrdersRepository(own.db);
      await repo.insertMany(Array.from({ length: 200 }, (_, i) => order(i)));
      await own.db.$executeRawUnsafe(`UPDATE orders SET status = 'PAID', paid_at = now()`);
      await own.db.$executeRawUnsafe('ANALYZE orders');
      const unpaid: string[] = [];
      for (let k = 0; k < 5; k++) unpaid.push(...(await repo.insertMany(Array.from({ length: 1_000 }, (_, i) => order(i)))).map((o) => o.id));
      const plan = async (q: Prisma.Sql) => JSON.stringify(await own.db.$queryRaw(Prisma.sql`EXPLAIN (FORMAT JSON) ${q}`));
      const statusIndexScans = (p: string) => p.split('"orders_status_expires_at_id_idx"').length - 1;
      expect(statusIndexScans(await plan(expireManySql(unpaid.slice(0, 300))))).toBe(0);
      // The pass's subquery takes the oldest overdue through the index; the UPDATE finds them by id.
      expect(statusIndexScans(await plan(cancelOverdueSql(30, 500)))).toBe(1);
    } finally {
      await own.drop();
    }
  });
});
