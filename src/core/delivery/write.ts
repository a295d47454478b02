// Written with its business change: the INSERT of delivery rows that a domain
// puts inside the statement making the change they announce (an order's
// cancel, a reminder's slot held and due, a batch made).
//
// Why inside that statement: the row exists if and only if the change
// committed, with no window in which a crash keeps one without the other (an
// outbox). Guard: the dedupe key's unique index, one row per business event;
// the caller adds the ON CONFLICT it needs (DO NOTHING, or takeBackOnConflict)
// and RETURNING. Lock order: the caller's; the INSERT locks only the rows it
// makes (or, on conflict, the one it meets; a take-back locks the rows it
// will change first, in id order: take-back.ts). New rows are PENDING,
// attempts 0.
import { Prisma } from '../../generated/prisma/client.js';
import type { DeliverySubject, NotificationKind } from './contract.js';

export type DeliveryInsert = {
  kind: NotificationKind;
  /** The new rows' ids, an expression over `from` (default: a new uuid each). */
  id?: Prisma.Sql;
  /** The FROM clause of the rows to announce: a CTE or table of the caller's statement. */
  from: Prisma.Sql;
  /** The dedupe key over `from`'s columns (contract.ts dedupeKeySql). */
  dedupeKey: Prisma.Sql;
  subject: { column: DeliverySubject; value: Prisma.Sql };
  /** The client (tenant) of the subject, an expression over `from`: a delivery row is its subject's client's. */
  client: Prisma.Sql;
  channel?: Prisma.Sql;
  recipient?: Prisma.Sql;
  /** What the receiver needs, a jsonb expression over `from`. */
  payload: Prisma.Sql;
  /** No delivery before this (a timer's fire time, the Redis clock's); default none. */
  dueAt?: Prisma.Sql;
  /** A condition over `from`: only its rows are written. The take-back's lock step goes here (take-back.ts). */
  where?: Prisma.Sql;
};

/** `INSERT INTO notifications (...) SELECT ... FROM <from>`. */
export function deliveryInsertSql(o: DeliveryInsert): Prisma.Sql {
  const cols: Prisma.Sql[] = [Prisma.raw('id, kind, dedupe_key, client'), Prisma.raw(o.subject.column)];
  const values: Prisma.Sql[] = [
    Prisma.sql`${o.id ?? Prisma.sql`gen_random_uuid()`}, ${o.kind}::"NotificationKind", ${o.dedupeKey}, ${o.client}`,
    o.subject.value,
  ];
  if (o.channel) {
    cols.push(Prisma.raw('channel'));
    values.push(o.channel);
  }
  if (o.recipient) {
    cols.push(Prisma.raw('recipient'));
    values.push(o.recipient);
  }
  if (o.dueAt) {
    cols.push(Prisma.raw('due_at'));
    values.push(o.dueAt);
  }
  cols.push(Prisma.raw('payload'));
  values.push(o.payload);
  const where = o.where ? Prisma.sql`WHERE ${o.where}` : Prisma.empty;
  return Prisma.sql`INSERT INTO notifications (${Prisma.join(cols)}) SELECT ${Prisma.join(values)} FROM ${o.from} ${where}`;
}
