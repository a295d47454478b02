// The orders' multi-row statements against each other: the expiry batch, an
// operator's extension page and the reminder writer lock the orders they share
// in id order (rows stored in the opposite order, so a statement locking in
// its scan's order would meet the others head-on: a deadlock); an expiry
// batch that waited for a deadline move answers the moved deadline, not
// "settled"; the expiry withdraws a payment reminder committed while it
// waited for the order, never cancelling the order in a statement that
// could not see that reminder, nor loses what its first round cancelled when
// a later round fails, and defers 100 ms an order changed under its lock in
// every round; the reminder writer writes nothing for an order changed under
// its lock (another writer's reminder it cannot see) and looks again in
// 100 ms; and an extension of more orders than a page extends each once.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSerializationFailure } from '../../../src/core/db-errors.js';
import { dedupeKey } from '../../../src/core/delivery/index.js';
import { createLogger } from '../../../src/core/logger.js';
import { EXTEND_PAGE } from '../../../src/modules/orders/orders.deadlines.js';
import { createOrdersRepository } from '../../../src/modules/orders/orders.repository.js';
import { EXPIRE_JOB, REMIND_JOB, createOrdersService, expireJobId } from '../../../src/modules/orders/orders.service.js';
import { createQueue } from '../../../src/queue/index.js';
import type { Db } from '../../../src/core/db.js';
import { expireManySql, expireOrders } from '../../../src/modules/orders/sql/cancel.js';
import { writePaymentReminders } from '../../../src/modules/orders/sql/write-payment-reminders.js';
import { newOrderRow } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { gate } from '../../helpers/queues.js';
import { redisClient, sleep, uniqueQueueName, waitFor } from '../../helpers/redis.js';

let tdb: TestDb;
const redis = redisClient('orders-lock-order');
beforeAll(async () => {
  tdb = await createTestDb('orders_lock_order');
});
afterAll(async () => {
  redis.disconnect();
  await tdb?.drop();
});

describe('orders locked in id order', () => {
  it('lets an expiry batch, an extension and the reminder writer share orders without a deadlock', async () => {
    const repo = createOrdersRepository(tdb.db);
    const deadlocks: unknown[] = [];
    for (let round = 0; round < 4; round++) {
      const client = `lock-${round}`;
      // Stored in descending id order: a scan in storage order meets the id order head-on. Half past
      // their deadline (the expiry's), half with their reminder due (the writer's); all in the extension's range.
      const ids = Array.from({ length: 300 }, () => randomUUID()).sort((a, b) => b.localeCompare(a));
      await repo.insertMany(ids.map((id, i) => (i % 2 ? newOrderRow(client, 0, { id }) : newOrderRow(client, 3, { id, lead: 2 }))));
      await new Promise((r) => setTimeout(r, 1_100));
      const range = { from: new Date(Date.now() - 3_600_000), to: new Date(Date.now() + 3_600_000), bySeconds: 60, client };
      const shuffled = [...ids].sort(() => Math.random() - 0.5);
      const results = await Promise.allSettled([
        repo.expireMany(shuffled),
        repo.extendDeadlinesPage(range, null, EXTEND_PAGE),
        repo.remindMany(shuffled),
        repo.expireMany([...ids].reverse()),
      ]);
      for (const r of results) if (r.status === 'rejected') (isSerializationFailure(r.reason) ? deadlocks : []).push(r.reason);
      for (const r of results) if (r.status === 'rejected' && !isSerializationFailure(r.reason)) throw r.reason;
      // Each order ended one way: cancelled by an expiry, or extended (UNPAID, its deadline ahead).
      const rows = await tdb.db.order.findMany({ where: { client }, select: { status: true, expiresAt: true } });
      for (const row of rows) expect(row.status === 'CANCELLED' || (row.status === 'UNPAID' && row.expiresAt.getTime() > Date.now())).toBe(true);
    }
    expect(deadlocks).toEqual([]);
  });

  it('answers an expiry that waited for a deadline move with the moved deadline (not settled)', async () => {
    const repo = createOrdersRepository(tdb.db);
    const [o] = await repo.insertMany([newOrderRow('waits', 0)]);
    const committing = gate();
    const locked = gate();
    const moving = tdb.db.$transaction(
      async (tx) => {
        await tx.$executeRaw`UPDATE orders SET expires_at = now() + interval '5 s' WHERE id = ${o!.id}::uuid AND status = 'UNPAID'`;
        locked.open();
        await committing.promise;
      },
      { timeout: 20_000 },
    );
    await locked.promise;
    await new Promise((r) => setTimeout(r, 50));
    const expiring = repo.expireMany([o!.id]);
    await new Promise((r) => setTimeout(r, 300));
    committing.open();
    await moving;
    const out = (await expiring).get(o!.id);
    expect(out?.kind).toBe('not_due');
    expect(out?.kind === 'not_due' && out.inMs).toBeGreaterThan(4_000);
    expect((await tdb.db.order.findUniqueOrThrow({ where: { id: o!.id } })).status).toBe('UNPAID');
  });
});

/**
 * An order past its deadline whose payment reminder a writer (in a held
 * transaction) committed 300 ms after `expire` started and waited for the
 * order's lock; returns the order's id and what `expire` answered.
 */
async function reminderCommittedWhileExpiring<T>(client: string, expire: (id: string) => Promise<T>): Promise<{ id: string; expired: T }> {
  const [o] = await createOrdersRepository(tdb.db).insertMany([newOrderRow(client, 2, { lead: 1 })]);
  await sleep(1_100);
  const committing = gate();
  const written = gate();
  const writing = tdb.db.$transaction(
    async (tx) => {
      expect((await writePaymentReminders(tx as unknown as Db, [o!.id])).get(o!.id)?.kind).toBe('written');
      written.open();
      await committing.promise;
    },
    { timeout: 20_000 },
  );
  await written.promise;
  await sleep(Math.max(0, o!.expiresAt.getTime() - Date.now() + 50));
  const expiring = expire(o!.id);
  await sleep(300);
  committing.open();
  await writing;
  return { id: o!.id, expired: await expiring };
}

/** `db` with its `$queryRaw` (the expiry's statements) replaced by `wrap` of the real one. */
function withQueryRaw(db: Db, wrap: (run: (...args: unknown[]) => Promise<unknown>) => (...args: unknown[]) => Promise<unknown>): Db {
  const run = (...args: unknown[]) => (db.$queryRaw as (...a: unknown[]) => Promise<unknown>).apply(db, args);
  return new Proxy(db, {
    get(target, prop) {
      const v = Reflect.get(target, prop) as unknown;
      if (typeof v !== 'function') return v;
      return prop === '$queryRaw' ? wrap(run) : v.bind(target);
    },
  });
}

/** Sessions of this database waiting for a lock in a statement that starts with `start`. */
const lockWaiters = async (start: string) =>
  (
    await tdb.db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ~ ${'^\\s*' + start}`
  )[0]!.n;

/** The order's payment reminders as [status, withdrawn]. */
const reminderStates = async (orderId: string) =>
  (await tdb.db.notification.findMany({ where: { orderId, kind: 'ORDER_PAYMENT_REMINDER' } })).map((n) => [n.status, n.withdrawnAt !== null]);

describe('the expiry and a payment reminder written meanwhile', () => {
  it('withdraws a reminder its writer committed while the expiry waited for the order', async () => {
    const repo = createOrdersRepository(tdb.db);
    const { id, expired } = await reminderCommittedWhileExpiring('meanwhile', (x) => repo.expireMany([x]));
    expect(expired.get(id)?.kind).toBe('cancelled');
    expect(await reminderStates(id)).toEqual([['CANCELLED', true]]);
  });

  it('never cancels, in the statement that could not see the reminder, the order it waited for', async () => {
    const repo = createOrdersRepository(tdb.db);
    // The statement alone, as one round of the expiry runs it; started at once (a Prisma query runs only once it is awaited or then'd).
    const { id, expired } = await reminderCommittedWhileExpiring('unseen', (x) =>
      tdb.db.$queryRaw<{ cancelled: boolean; changed: boolean; ms: number }[]>(expireManySql([x])).then((rows) => rows),
    );
    expect(expired.map((r) => [r.cancelled, r.changed, r.ms])).toEqual([[false, true, 0]]);
    expect((await tdb.db.order.findUniqueOrThrow({ where: { id } })).status).toBe('UNPAID');
    // The next round: cancelled with its reminder, in one statement.
    expect((await repo.expireMany([id])).get(id)?.kind).toBe('cancelled');
    expect(await reminderStates(id)).toEqual([['CANCELLED', true]]);
  });
});

describe('the expiry when a later round fails', () => {
  it('keeps what the first round cancelled (its notice in the answer) and defers the changed order briefly', async () => {
    const [plain] = await createOrdersRepository(tdb.db).insertMany([newOrderRow('round-fail', 1)]);
    let statements = 0;
    // The database as the expiry sees it: its second statement (the round for the changed order) fails.
    const failing = withQueryRaw(
      tdb.db,
      (run) =>
        (...args) =>
          ++statements === 2 ? Promise.reject(new Error('connection lost')) : run(...args),
    );
    const { id, expired } = await reminderCommittedWhileExpiring('round-fail', (x) => expireOrders(failing, [plain!.id, x]));
    expect(statements).toBe(2);
    expect(expired.get(plain!.id)).toMatchObject({ kind: 'cancelled', notificationId: expect.any(String) });
    expect(expired.get(id)).toEqual({ kind: 'not_due', inMs: 100 });
    expect((await tdb.db.order.findUniqueOrThrow({ where: { id } })).status).toBe('UNPAID');
  });
});

describe('the expiry of an order a writer changes under its lock in every round', () => {
  it('defers it 100 ms after three statements, cancelling nothing the statements could not see', async () => {
    const [o] = await createOrdersRepository(tdb.db).insertMany([newOrderRow('every-round', 1)]);
    await sleep(Math.max(0, o!.expiresAt.getTime() - Date.now() + 50));
    let statements = 0;
    // Before each of the expiry's statements, a writer takes the order's lock and changes its row (a new
    // version, as the reminder writer's mark makes), and commits only once the statement waits for that lock.
    const contended = withQueryRaw(tdb.db, (run) => async (...args) => {
      statements++;
      const locked = gate();
      const release = gate();
      const writer = tdb.db.$transaction(
        async (tx) => {
          await tx.$executeRaw`UPDATE orders SET expires_at = expires_at WHERE id = ${o!.id}::uuid`;
          locked.open();
          await release.promise;
        },
        { timeout: 20_000 },
      );
      await locked.promise;
      const statement = run(...args).then((r) => r);
      expect(await waitFor(async () => (await lockWaiters('WITH')) > 0, 20_000, 20)).toBe(true);
      release.open();
      await writer;
      return statement;
    });
    const expired = await expireOrders(contended, [o!.id]);
    expect(statements).toBe(3);
    expect(expired.get(o!.id)).toEqual({ kind: 'not_due', inMs: 100 });
    expect((await tdb.db.order.findUniqueOrThrow({ where: { id: o!.id } })).status).toBe('UNPAID');
    // Left alone, the next expiry cancels it.
    expect((await expireOrders(tdb.db, [o!.id])).get(o!.id)?.kind).toBe('cancelled');
  });
});

describe("an operator's extension in pages", () => {
  it('extends every order of a range larger than a page exactly once, each page moving its jobs', async () => {
    const repo = createOrdersRepository(tdb.db);
    const client = 'pages';
    const n = EXTEND_PAGE * 2 + 500;
    const made = [];
    for (let i = 0; i < n; i += 500) made.push(...(await repo.insertMany(Array.from({ length: Math.min(500, n - i) }, () => newOrderRow(client, 600)))));
    const queue = createQueue(redis, { name: uniqueQueueName('orders-pages'), types: { [EXPIRE_JOB]: {}, [REMIND_JOB]: {} } });
    const service = createOrdersService({
      repo,
      queue,
      dispatch: async () => undefined,
      log: createLogger('silent'),
      defaultTimeoutSeconds: 60,
      maxWindowSeconds: 604_800,
      reminderBeforeSeconds: undefined,
    });
    const from = new Date(Math.min(...made.map((o) => o.expiresAt.getTime())));
    const to = new Date(Math.max(...made.map((o) => o.expiresAt.getTime())) + 60_000); // every extended deadline still inside
    expect(await service.extend(from, to, 7, client)).toBe(n);
    const rows = new Map((await tdb.db.order.findMany({ where: { client }, select: { id: true, expiresAt: true } })).map((r) => [r.id, r.expiresAt.getTime()]));
    for (const o of made) expect(rows.get(o.id)).toBe(o.expiresAt.getTime() + 7_000);
    for (const o of made.slice(0, 20)) expect((await queue.get(expireJobId(o.id)))?.dueAt).toBe(o.expiresAt.getTime() + 7_000);
  });
});

describe('the reminder writer and an order changed under its lock', () => {
  it('writes nothing for an order another writer reminded while it waited for its lock, and looks again in 100 ms', async () => {
    // The other writer's reminder is not in this statement's snapshot: written for, its
    // ON CONFLICT would lock that row outside id order (a deadlock with a SENT mark holding it).
    const repo = createOrdersRepository(tdb.db);
    const [o] = await repo.insertMany([newOrderRow('reminded-meanwhile', 3, { lead: 2 })]);
    await sleep(1_100);
    const other = randomUUID();
    const committing = gate();
    const locked = gate();
    const writer = tdb.db.$transaction(
      async (tx) => {
        await tx.$executeRaw`UPDATE orders SET payment_remind_at = payment_remind_at WHERE id = ${o!.id}::uuid`;
        await tx.$executeRaw`INSERT INTO notifications (id, kind, dedupe_key, client, order_id, payload)
          VALUES (${other}::uuid, 'ORDER_PAYMENT_REMINDER', ${dedupeKey.orderPaymentReminder(o!.id, o!.expiresAt.getTime())}, ${o!.client}, ${o!.id}::uuid, '{}')`;
        locked.open();
        await committing.promise;
      },
      { timeout: 20_000 },
    );
    await locked.promise;
    const waited = writePaymentReminders(tdb.db, [o!.id]);
    expect(await waitFor(async () => (await lockWaiters('WITH due AS')) > 0, 5_000)).toBe(true);
    committing.open();
    await writer;
    expect((await waited).get(o!.id)).toEqual({ kind: 'not_due', inMs: 100 });
    // Looked at again, it finds the other writer's reminder waiting for its delivery.
    expect((await writePaymentReminders(tdb.db, [o!.id])).get(o!.id)).toEqual({ kind: 'pending', notificationId: other });
    expect(await tdb.db.notification.count({ where: { orderId: o!.id } })).toBe(1);
  });
});
