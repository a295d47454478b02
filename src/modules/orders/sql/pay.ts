// Paid: UNPAID and inside its window by the database clock -> PAID, its
// undelivered payment reminder withdrawn in the same transaction.
// One statement for the change: the guard is judged on the row as it is when
// the UPDATE takes it, so a pay racing the expiry, a deadline move (or
// another pay) ends with one winner; the withdrawal is a second statement
// after it (reminder-withdrawal.ts says why).
// Guard: `status = 'UNPAID' AND expires_at > now()`, on an order of the
// caller's client. Lock order: the one row, then its reminder rows. Returns
// the paid order, or null when nothing changed (paid, cancelled, past its
// window, or unknown to the client).
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { type OrderRow, type RawOrder, orderSelect, toRow } from './order-row.js';
import { withdrawPaymentRemindersSql } from './reminder-withdrawal.js';

export async function payOrder(db: Db, client: string, id: string, paymentRef: string | null): Promise<OrderRow | null> {
  const [[o]] = await db.$transaction([
    db.$queryRaw<RawOrder[]>`
      WITH paid AS (
        UPDATE orders SET status = 'PAID', paid_at = now(), payment_ref = ${paymentRef}
         WHERE id = ${id}::uuid AND client = ${client} AND status = 'UNPAID' AND expires_at > now()
        RETURNING *
      ) ${orderSelect(Prisma.sql`paid o`)}`,
    db.$executeRaw(withdrawPaymentRemindersSql(Prisma.sql`id = ${id}::uuid AND client = ${client}`, 'order paid before its payment reminder was delivered')),
  ]);
  return o ? toRow(o) : null;
}
