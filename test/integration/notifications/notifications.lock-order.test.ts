// The delivery room's statements that change many rows lock them in id order,
// whatever order their scan meets them in (storage order, or a subject's
// index for a withdrawal): two of them sharing rows in opposite orders would
// deadlock. Each statement is stopped at the row with the smallest id (held
// by another transaction) with that row neither first in storage nor first
// by its order; while it waits, it must hold none of its other rows. The
// take-back of both reminder writers (orders', appointments') too: its ON
// CONFLICT alone would lock the rows in its subjects' order (a take-back of
// two withdrawn SENDING rows deadlocked with the SENT mark of both).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Prisma } from '../../../src/generated/prisma/client.js';
import { claimDeliveries } from '../../../src/core/delivery/claim.js';
import { markAbandoned } from '../../../src/core/delivery/abandon.js';
import { markSentMany } from '../../../src/core/delivery/mark-sent.js';
import { requestRedrive } from '../../../src/core/delivery/redrive.js';
import { writeReminders } from '../../../src/modules/appointments/sql/write-reminders.js';
import { createOrdersRepository } from '../../../src/modules/orders/orders.repository.js';
import { withdrawSettledPaymentRemindersSql } from '../../../src/modules/orders/sql/reminder-withdrawal.js';
import { newOrderRow } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { gate } from '../../helpers/queues.js';
import { sleep, waitFor } from '../../helpers/redis.js';

let tdb: TestDb;
beforeAll(async () => {
  tdb = await createTestDb('notifications_lock_order');
});
afterAll(async () => {
  await tdb?.drop();
});

type Row = { id: string; order_id: string };

/**
 * Payment reminders of fresh orders (after `prepare` changed them), cut down
 * until the smallest id of those left is neither the first in storage order
 * nor the first by order id.
 */
async function rowsMetOutOfIdOrder(timeoutSeconds = 3, prepare?: (rows: Row[]) => Promise<unknown>): Promise<Row[]> {
  const repo = createOrdersRepository(tdb.db);
  const orders = await repo.insertMany(Array.from({ length: 16 }, () => newOrderRow('lock', timeoutSeconds, { lead: timeoutSeconds - 1 })));
  await sleep(1_100);
  await repo.remindMany(orders.map((o) => o.id));
  if (prepare)
    await prepare(await tdb.db.$queryRaw<Row[]>`SELECT id::text, order_id::text FROM notifications WHERE order_id = ANY(${orders.map((o) => o.id)}::uuid[])`);
  let rows = await tdb.db.$queryRaw<Row[]>`SELECT id::text, order_id::text FROM notifications
     WHERE order_id = ANY(${orders.map((o) => o.id)}::uuid[]) ORDER BY ctid`;
  expect(rows.length).toBe(16);
  const smallest = (rs: Row[]) => rs.reduce((a, b) => (a.id < b.id ? a : b));
  const firstByOrder = (rs: Row[]) => rs.reduce((a, b) => (a.order_id < b.order_id ? a : b));
  while (rows.length > 2 && (smallest(rows) === rows[0] || smallest(rows) === firstByOrder(rows))) {
    const s = smallest(rows);
    rows = rows.filter((r) => r !== s);
  }
  expect(smallest(rows)).not.toBe(rows[0]);
  expect(smallest(rows)).not.toBe(firstByOrder(rows));
  return rows;
}

/** The slot the appointments below start at (ms, whole seconds: the key's precision). */
const SLOT_MS = Math.floor(Date.now() / 1_000) * 1_000 + 3_600_000;

/**
 * Four booked appointments, due for their reminder, each with a reminder
 * SENDING and withdrawn: reminder ids in the reverse order of their
 * appointments', so the smallest is the last met by subject and not the first
 * in storage. (`order_id` is the appointment.)
 */
async function appointmentRemindersMetOutOfIdOrder(): Promise<Row[]> {
  const appointments = Array.from({ length: 4 }, () => randomUUID()).sort();
  const reminders = Array.from({ length: 4 }, () => randomUUID())
    .sort()
    .reverse();
  await tdb.db.$executeRaw`INSERT INTO appointments (id, client, customer_id, contact, channel, starts_at, remind_before_seconds, remind_at)
    SELECT a, 'lock', 'lock', 'lock@example.com', 'EMAIL', ${new Date(SLOT_MS)}, 3600, now() - interval '1 second' FROM unnest(${appointments}::uuid[]) a`;
  await tdb.db.$executeRaw`INSERT INTO notifications (id, kind, dedupe_key, client, appointment_id, channel, recipient, payload, status, withdrawn_at)
    SELECT r, 'APPOINTMENT_REMINDER', 'appointment-reminder:' || a || ':' || ${SLOT_MS}::bigint, 'lock', a, 'EMAIL', 'lock@example.com', '{}', 'SENDING', now()
      FROM unnest(${appointments}::uuid[], ${reminders}::uuid[]) AS t(a, r)`;
  const rows = await tdb.db.$queryRaw<Row[]>`SELECT id::text, appointment_id::text AS order_id FROM notifications
     WHERE appointment_id = ANY(${appointments}::uuid[]) ORDER BY ctid`;
  const smallest = rows.reduce((a, b) => (a.id < b.id ? a : b));
  expect(smallest).not.toBe(rows[0]);
  expect(smallest.order_id).toBe(appointments[3]);
  return rows;
}

const waiting = async () =>
  (
    await tdb.db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND wait_event_type = 'Lock'`
  )[0]!.n > 0;

describe('delivery rows locked in id order', () => {
  /** A case: its statement over the rows, and how the rows are made (default: rowsMetOutOfIdOrder's fresh reminders). */
  const statements: [string, (rows: Row[]) => Promise<unknown>, (() => Promise<Row[]>)?][] = [
    [
      'the SENT mark of a batch',
      (rows) =>
        markSentMany(
          tdb.db,
          rows.map((r) => r.id),
        ),
    ],
    [
      'the claim of a batch',
      (rows) =>
        claimDeliveries(
          tdb.db,
          rows.map((r) => ({ id: r.id, dueAt: new Date() })),
          60_000,
        ),
    ],
    [
      'the withdrawal of settled orders',
      // async: a Prisma query runs only once awaited.
      async (rows) =>
        tdb.db.$executeRaw(
          withdrawSettledPaymentRemindersSql(
            rows.map((r) => r.order_id),
            'x',
          ),
        ),
    ],
    [
      'the abandonment of a page',
      (rows) =>
        markAbandoned(
          tdb.db,
          rows.map((r) => r.id),
          0,
        ),
    ],
    [
      'the redrive request',
      (rows) =>
        requestRedrive(
          tdb.db,
          rows.map((r) => r.id),
          true,
        ),
    ],
    [
      'the take-back of a reminder writer',
      // Its orders' reminders are being sent and withdrawn (their deadlines
      // moved away); the writer finds them due again, for the same deadlines.
      async (rows) => {
        await createOrdersRepository(tdb.db).remindMany(rows.map((r) => r.order_id));
        const left = await tdb.db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM notifications
           WHERE id = ANY(${rows.map((r) => r.id)}::uuid[]) AND (status::text <> 'SENDING' OR withdrawn_at IS NOT NULL)`;
        expect(left[0]!.n).toBe(0);
      },
      () =>
        rowsMetOutOfIdOrder(60, async (rows) => {
          await claimDeliveries(
            tdb.db,
            rows.map((r) => ({ id: r.id, dueAt: new Date() })),
            60_000,
          );
          await tdb.db.$executeRaw(
            withdrawSettledPaymentRemindersSql(
              rows.map((r) => r.order_id),
              'moved',
            ),
          );
        }),
    ],
    [
      'the take-back of the appointments reminder writer',
      // Its slots' reminders are being sent and withdrawn; the writer finds the same slots held and due again.
      async (rows) => {
        const written = await writeReminders(
          tdb.db,
          rows.map((r) => ({ appointmentId: r.order_id, startsAtMs: SLOT_MS })),
        );
        expect(written.size).toBe(rows.length);
      },
      () => appointmentRemindersMetOutOfIdOrder(),
    ],
  ];
  for (const [name, run, made = () => rowsMetOutOfIdOrder()] of statements) {
    it(`${name} holds none of its rows while it waits for the smallest`, async () => {
      const rows = await made();
      const smallest = rows.reduce((a, b) => (a.id < b.id ? a : b));
      const others = rows.filter((r) => r !== smallest).map((r) => r.id);
      const locked = gate();
      const release = gate();
      const holder = tdb.db.$transaction(
        async (tx) => {
          await tx.$queryRaw`SELECT id FROM notifications WHERE id = ${smallest.id}::uuid FOR UPDATE`;
          locked.open();
          await release.promise;
        },
        { timeout: 20_000 },
      );
      await locked.promise;
      const statement = run(rows);
      try {
        expect(await waitFor(waiting, 5_000)).toBe(true);
        // NOWAIT fails at once on a row the waiting statement already holds.
        const free = await tdb.db.$queryRaw<{ id: string }[]>(
          Prisma.sql`SELECT id::text FROM notifications WHERE id = ANY(${others}::uuid[]) FOR UPDATE NOWAIT`,
        );
        expect(free.length).toBe(others.length);
      } finally {
        release.open();
        await holder;
        await statement;
      }
    }, 30_000);
  }
});
