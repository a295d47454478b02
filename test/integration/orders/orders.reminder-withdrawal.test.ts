// The expiry's withdrawal (in its statement) and the reconciliation pass's
// find the live payment reminders of the orders they cancelled through
// notifications_live_payment_reminder_idx; its
// plan on a table holding a history of settled notifications, and the rows it
// reaches (every live state: PENDING, FAILED, refused FAILED, SENDING).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Prisma } from '../../../src/generated/prisma/client.js';
import { createOrdersRepository } from '../../../src/modules/orders/orders.repository.js';
import { expireManySql } from '../../../src/modules/orders/sql/cancel.js';
import { listUnpaidSql, listUnremindedSql } from '../../../src/modules/orders/sql/reads.js';
import { withdrawSettledPaymentRemindersSql, withdrawPaymentRemindersSql } from '../../../src/modules/orders/sql/reminder-withdrawal.js';
import { newOrderRow } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep } from '../../helpers/redis.js';

let tdb: TestDb;
beforeAll(async () => {
  tdb = await createTestDb('orders_withdrawal');
});
afterAll(async () => {
  await tdb?.drop();
});

describe('the live payment reminders index', () => {
  it('serves the expiry withdrawal, and reaches every live reminder state', async () => {
    const repo = createOrdersRepository(tdb.db);
    // History: 20 000 orders cancelled by the expiry (one ORDER_CANCELLED row each).
    for (let i = 0; i < 20; i++) {
      const made = await repo.insertMany(Array.from({ length: 1_000 }, () => newOrderRow('hist', 0)));
      await repo.expireMany(made.map((o) => o.id));
    }
    const live = await repo.insertMany(Array.from({ length: 500 }, () => newOrderRow('live', 3, { lead: 2 })));
    await sleep(1_100);
    await repo.remindMany(live.map((o) => o.id));
    await tdb.db.$executeRawUnsafe('ANALYZE notifications');
    await tdb.db.$executeRawUnsafe('ANALYZE orders');
    const ids = live.map((o) => o.id);
    const plans: string[] = [];
    for (const [name, sql] of [
      ['expiry (its statement)', expireManySql(ids)],
      ['settled (the reconciliation pass)', withdrawSettledPaymentRemindersSql(ids, 'x')],
      ['settled, 1 id', withdrawSettledPaymentRemindersSql(ids.slice(0, 1), 'x')],
      ['by orders (pay, cancel, move)', withdrawPaymentRemindersSql(Prisma.sql`id = ANY(${ids}::uuid[])`, 'x')],
    ] as const) {
      const rows = await tdb.db.$queryRaw<{ 'QUERY PLAN': string }[]>(Prisma.sql`EXPLAIN ${sql}`);
      // The ids' literal shortened: the plan's shape is what is read.
      const plan = rows.map((r) => r['QUERY PLAN'].replace(/'\{[^}]*\}'/g, "'{…}'")).join('\n');
      plans.push(`-- ${name}\n${plan}`);
    }
    console.log(plans.join('\n'));
    // States: a few reminders put in each live state, then the withdrawal.
    const rs = await tdb.db.$queryRaw<{ id: string; order_id: string }[]>`SELECT id::text, order_id::text FROM notifications
       WHERE kind = 'ORDER_PAYMENT_REMINDER' AND order_id = ANY(${ids}::uuid[]) ORDER BY order_id LIMIT 4`;
    expect(rs.length).toBe(4);
    await tdb.db.$executeRaw`UPDATE notifications SET status = 'FAILED' WHERE id = ${rs[1]!.id}::uuid`;
    await tdb.db.$executeRaw`UPDATE notifications SET status = 'FAILED', refused = true WHERE id = ${rs[2]!.id}::uuid`;
    await tdb.db.$executeRaw`UPDATE notifications SET status = 'SENDING', sending_at = now() WHERE id = ${rs[3]!.id}::uuid`;
    const n = await tdb.db.$executeRaw(withdrawSettledPaymentRemindersSql(ids, 'x'));
    expect(n).toBe(500);
    const after = await tdb.db.$queryRaw<{ status: string; withdrawn: boolean }[]>`SELECT status::text, withdrawn_at IS NOT NULL AS withdrawn
       FROM notifications WHERE id = ANY(${rs.map((r) => r.id)}::uuid[]) ORDER BY order_id`;
    expect(after).toEqual([
      { status: 'CANCELLED', withdrawn: true },
      { status: 'CANCELLED', withdrawn: true },
      { status: 'FAILED', withdrawn: true },
      { status: 'SENDING', withdrawn: true },
    ]);
    for (const plan of plans.slice(0, 3)) expect(plan).toMatch(/notifications_live_payment_reminder_idx/);
    expect(plans[0]).not.toMatch(/Seq Scan on notifications/);
  }, 60_000);
});

// A fresh database (never analyzed, as after a deploy or with autovacuum off)
// with many live reminders: each statement must reach the rows of its own
// orders by an index condition, not read every live row against each order
// (what made the expiry's cost grow with the undelivered backlog).
describe('on tables never analyzed, with many live reminders', () => {
  let fresh: TestDb;
  beforeAll(async () => {
    fresh = await createTestDb('orders_withdrawal_fresh');
  });
  afterAll(async () => {
    await fresh?.drop();
  });

  it('finds the reminders of the orders withdrawn by index condition, and pages the pass by its keyset', async () => {
    const repo = createOrdersRepository(fresh.db);
    const live = await repo.insertMany(Array.from({ length: 2_000 }, () => newOrderRow('live', 3, { lead: 2 })));
    await sleep(1_100);
    await repo.remindMany(live.map((o) => o.id));
    const ids = live.slice(0, 20).map((o) => o.id);
    const explain = async (sql: Prisma.Sql) =>
      (await fresh.db.$queryRaw<{ 'QUERY PLAN': string }[]>(Prisma.sql`EXPLAIN ${sql}`)).map((r) => r['QUERY PLAN']).join('\n');
    for (const sql of [
      expireManySql(ids),
      withdrawSettledPaymentRemindersSql(ids, 'x'),
      withdrawPaymentRemindersSql(Prisma.sql`id = ANY(${ids}::uuid[])`, 'x'),
    ]) {
      const plan = await explain(sql);
      expect(plan).toMatch(/Index Cond: \(order_id = ANY/);
      // Every read of the table by an index condition: none of every live row.
      const lines = plan.split('\n');
      const reads = lines.flatMap((line, i) => (/Scan .*on notifications/.test(line) ? [lines.slice(i, i + 3).join('\n')] : []));
      expect(reads.length).toBeGreaterThan(0);
      for (const read of reads) expect(read).toMatch(/(Index|Recheck) Cond:/);
    }
    // The pass's pages: in index order from the cursor, no sort of the whole horizon.
    const until = new Date(Date.now() + 60_000);
    const after = { id: live[0]!.id, expiresAt: live[0]!.expiresAt, remindAt: live[0]!.paymentRemindAt! };
    for (const sql of [listUnpaidSql(until, after, 100), listUnremindedSql(until, 30, after, 100)]) {
      const plan = await explain(sql);
      expect(plan).not.toMatch(/Sort/);
      expect(plan).toMatch(/Index Cond: .*ROW\(/);
    }
  }, 60_000);
});
