// SQL of the appointments domain. Every change is one conditional statement on
// the database clock; the reminder is written only by the statement that checks
// the appointment still holds the slot the reminder was scheduled for.
import type { Db } from '../../core/db.js';
import {
  type NotificationStatus,
  type WrittenOrTakenBack,
  dedupeKey,
  dedupeKeySql,
  deliveriesDeleteSql,
  deliveriesSettledSql,
  deliveryInsertSql,
  liveSql,
  takeBackOnConflictSql,
  withdrawSql,
} from '../../core/delivery/index.js';
import { Prisma } from '../../generated/prisma/client.js';
import { type PurgeStatement, purgeOf } from '../../core/retention.js';
import { MAX_LEAD_SECONDS } from './appointments.schemas.js';

export type AppointmentRow = {
  id: string;
  customerId: string;
  contact: string;
  channel: 'SMS' | 'EMAIL';
  status: 'BOOKED' | 'CANCELLED';
  startsAt: Date;
  remindBeforeSeconds: number;
  remindAt: Date;
  createdAt: Date;
  updatedAt: Date;
  cancelledAt: Date | null;
};

const COLUMNS = Prisma.sql`id, customer_id AS "customerId", contact, channel::text AS channel, status::text AS status,
  starts_at AS "startsAt", remind_before_seconds AS "remindBeforeSeconds", remind_at AS "remindAt",
  created_at AS "createdAt", updated_at AS "updatedAt", cancelled_at AS "cancelledAt"`;

/** The dedupe key of the reminder of the slot appointment `a` holds now. */
const HELD_SLOT_KEY = dedupeKeySql.appointmentReminder(Prisma.sql`a.id`, Prisma.sql`a.starts_at`);

/**
 * Withdraws the undelivered reminders of appointment `id` for any slot it no
 * longer holds (every slot once cancelled), with `reason`: the delivery
 * room's withdrawal (core/delivery/withdraw.ts), run as its own statement
 * after the change, in the change's transaction.
 */
const withdrawReminders = (id: string, reason: string) =>
  withdrawSql({
    kind: 'APPOINTMENT_REMINDER',
    subject: 'appointment_id',
    from: Prisma.sql`(SELECT a.id, CASE WHEN a.status = 'CANCELLED' THEN NULL ELSE ${HELD_SLOT_KEY} END AS kept_key
                        FROM appointments a WHERE a.id = ${id}::uuid) s`,
    reason,
  });

/**
 * Not marked reminded (the predicate of the partial index
 * appointments_unreminded_idx): the pass reads only these, then checks their
 * reminder rows. writeReminder marks its appointment; a trigger unmarks it
 * with any change of the booking (slot, status, updated_at), among them the
 * one way a slot's live reminder is withdrawn while it stays BOOKED: a move.
 */
const UNMARKED = Prisma.sql`NOT a.reminded`;

/** A slot a reminder job was scheduled for: the appointment and the start it then had (ms). */
export type ReminderSlot = { readonly appointmentId: string; readonly startsAtMs: number };
/** The dedupe key of a slot's reminder (the id as the database writes it). */
export const slotKey = (s: ReminderSlot): string => dedupeKey.appointmentReminder(s.appointmentId.toLowerCase(), s.startsAtMs);

/** What reminderStates finds of a slot. */
export type ReminderState = {
  reminder: { id: string; status: NotificationStatus; live: boolean } | null;
  appointment: { id: string; status: 'BOOKED' | 'CANCELLED'; startsAt: Date; remindAt: Date; sameSlot: boolean; msToRemind: number } | null;
};

export type NewAppointment = {
  id: string;
  customerId: string;
  contact: string;
  channel: 'SMS' | 'EMAIL';
  startsAt: Date;
  remindBeforeSeconds: number;
  idempotencyKey: string | null;
  requestHash: string | null;
};

/** The reminder of the slot `a` holds (a row of `w`, locked by the writing statement). */
const REMINDER_FROM_W = deliveryInsertSql({
  kind: 'APPOINTMENT_REMINDER',
  from: Prisma.sql`w a`,
  dedupeKey: HELD_SLOT_KEY,
  subject: { column: 'appointment_id', value: Prisma.sql`a.id` },
  channel: Prisma.sql`a.channel`,
  recipient: Prisma.sql`a.contact`,
  payload: Prisma.sql`jsonb_build_object('appointmentId', a.id, 'customerId', a.customer_id,
                                         'startsAt', to_char(a.starts_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`,
});

/** An appointment may go when its slot lies behind the cutoff, nothing changed it since, and its reminders are settled. */
const finished = (cutoff: Prisma.Sql) =>
  Prisma.sql`t.starts_at < ${cutoff} AND t.updated_at < ${cutoff} AND ${deliveriesSettledSql('appointment_id', Prisma.sql`t.id`, cutoff)}`;
/** Retention's statements: BOOKED appointments by start (their partial index), CANCELLED ones by remind time (before the start). */
const PURGE_BOOKED: PurgeStatement = {
  table: 'appointments',
  key: 'starts_at',
  range: Prisma.sql`t.status = 'BOOKED'`,
  terminal: finished,
  alsoDelete: [deliveriesDeleteSql('appointment_id', Prisma.sql`c`)],
};
const PURGE_CANCELLED: PurgeStatement = { ...PURGE_BOOKED, key: 'remind_at', range: Prisma.sql`t.status = 'CANCELLED'` };

export function createAppointmentsRepository(db: Db) {
  const one = async (rows: Promise<AppointmentRow[]>) => (await rows)[0] ?? null;

  /**
   * Inserts appointments in one statement (all or none), answering in input
   * order; remind_at = starts_at - lead, or now when that has passed, and
   * the times by the database clock.
   */
  async function insertMany(rows: readonly NewAppointment[]): Promise<AppointmentRow[]> {
    const col = <T>(f: (r: NewAppointment) => T) => rows.map(f);
    const inserted = await db.$queryRaw<AppointmentRow[]>`
      INSERT INTO appointments (id, customer_id, contact, channel, starts_at, remind_before_seconds, remind_at,
                                created_at, updated_at, idempotency_key, request_hash)
      SELECT t.id, t.customer_id, t.contact, t.channel, t.starts_at, t.lead,
             GREATEST(t.starts_at - make_interval(secs => t.lead), now()), now(), now(), t.idem_key, t.req_hash
        FROM unnest(${col((r) => r.id)}::uuid[], ${col((r) => r.customerId)}::text[], ${col((r) => r.contact)}::text[],
                    ${col((r) => r.channel)}::"Channel"[], ${col((r) => r.startsAt)}::timestamptz[],
                    ${col((r) => r.remindBeforeSeconds)}::int[], ${col((r) => r.idempotencyKey)}::text[], ${col((r) => r.requestHash)}::text[])
             AS t(id, customer_id, contact, channel, starts_at, lead, idem_key, req_hash)
      RETURNING ${COLUMNS}`;
    const byId = new Map(inserted.map((r) => [r.id, r]));
    return rows.map((r) => {
      const row = byId.get(r.id);
      if (!row) throw new Error(`appointment ${r.id} was not inserted`);
      return row;
    });
  }

  /**
   * writeReminder for many slots in one statement (the reminder jobs of a
   * batch, the pass's overdue page), each judged on its own as there; what
   * was written or taken back, by the reminder's dedupe key (slotKey). The
   * appointments are locked in id order, so two such statements sharing some
   * wait for each other rather than deadlock.
   */
  async function writeReminders(slots: readonly ReminderSlot[]): Promise<Map<string, { id: string; fresh: boolean }>> {
    if (slots.length === 0) return new Map();
    const ids = slots.map((x) => x.appointmentId);
    const rows = await db.$queryRaw<WrittenOrTakenBack[]>`
      WITH a AS (
        SELECT id, customer_id, contact, channel, starts_at, reminded FROM appointments
         WHERE id = ANY(${ids}::uuid[])
           -- Compared in whole ms: a float round trip through seconds could miss by a microsecond.
           AND (id, floor(extract(epoch FROM starts_at) * 1000)::bigint) IN (SELECT * FROM unnest(${ids}::uuid[], ${slots.map((x) => x.startsAtMs)}::bigint[]))
           -- As text and through an expression, which no index holds: the
           -- rows are found by their ids, whatever the statistics say (read
           -- through the index of BOOKED appointments by remind time, a batch
           -- would read every appointment due).
           AND status::text = 'BOOKED' AND remind_at + interval '0' <= now()
         ORDER BY id
         FOR UPDATE
      ), marked AS (
        -- Whatever the insert below finds, the slot has a live reminder after this statement.
        UPDATE appointments SET reminded = true FROM a WHERE appointments.id = a.id
      ), w AS (
        -- A slot marked reminded has its live reminder (a writer that came
        -- first committed its mark with it, and any change of the booking
        -- since would have cleared the mark): nothing is inserted for it.
        -- ON CONFLICT would lock that reminder too, even to change nothing,
        -- while this statement goes on locking the next appointments, and the
        -- deliveries' claims and SENT marks lock such rows in their own order
        -- (a deadlock). Not a look at the reminders themselves: this
        -- statement's snapshot may predate a move away and back that withdrew
        -- the reminder it would see live.
        SELECT * FROM a WHERE NOT a.reminded
      )
      ${REMINDER_FROM_W}
      ${takeBackOnConflictSql}`;
    return new Map(rows.map((r) => [r.key, { id: r.id, fresh: r.fresh }]));
  }

  return {
    /** insertMany of one. */
    async insert(a: NewAppointment): Promise<AppointmentRow | null> {
      return (await insertMany([a]))[0] ?? null;
    },

    insertMany,

    find(id: string): Promise<AppointmentRow | null> {
      return one(db.$queryRaw<AppointmentRow[]>`SELECT ${COLUMNS} FROM appointments WHERE id = ${id}::uuid`);
    },

    async findByIdempotencyKey(key: string): Promise<{ row: AppointmentRow; requestHash: string | null } | null> {
      const rows = await db.$queryRaw<(AppointmentRow & { requestHash: string | null })[]>`
        SELECT ${COLUMNS}, request_hash AS "requestHash" FROM appointments WHERE idempotency_key = ${key}`;
      const r = rows[0];
      if (!r) return null;
      const { requestHash, ...row } = r;
      return { row, requestHash };
    },

    /**
     * BOOKED -> new slot and/or lead; null when not BOOKED (or missing). In the
     * same transaction, undelivered reminders of other slots are withdrawn: a
     * reminder must never go out for a slot the appointment no longer has.
     */
    async reschedule(id: string, startsAt: Date | null, lead: number | null): Promise<AppointmentRow | null> {
      const [rows] = await db.$transaction([
        db.$queryRaw<AppointmentRow[]>`
          UPDATE appointments
             SET starts_at = COALESCE(${startsAt}::timestamptz, starts_at),
                 remind_before_seconds = COALESCE(${lead}::int, remind_before_seconds),
                 remind_at = GREATEST(COALESCE(${startsAt}::timestamptz, starts_at)
                                      - make_interval(secs => COALESCE(${lead}::int, remind_before_seconds)), now()),
                 updated_at = now()
           WHERE id = ${id}::uuid AND status = 'BOOKED'
          RETURNING ${COLUMNS}`,
        db.$executeRaw(withdrawReminders(id, 'appointment moved before the reminder was delivered')),
      ]);
      return rows[0] ?? null;
    },

    /** BOOKED -> CANCELLED, withdrawing undelivered reminders; null when it was not BOOKED. */
    async cancel(id: string): Promise<AppointmentRow | null> {
      const [rows] = await db.$transaction([
        db.$queryRaw<AppointmentRow[]>`
          UPDATE appointments SET status = 'CANCELLED', cancelled_at = now(), updated_at = now()
           WHERE id = ${id}::uuid AND status = 'BOOKED'
          RETURNING ${COLUMNS}`,
        db.$executeRaw(withdrawReminders(id, 'appointment cancelled before the reminder was delivered')),
      ]);
      return rows[0] ?? null;
    },

    /**
     * The reminder, in one statement: written only if the appointment is BOOKED,
     * still starts at `startsAt` and its remind time has come (database clock),
     * and only once per slot. Locks the row so a concurrent reschedule either
     * commits first (no reminder for the old slot) or waits for this one (and
     * then withdraws it if it is not delivered yet).
     *
     * A slot held again after it was given up (moved away and back) gets its
     * withdrawn reminder back: a CANCELLED one is PENDING again, from its first
     * attempt (FAILED if the receiver refused it: refused while withdrawn, or
     * before); one still being sent loses its withdrawal. A slot's reminder
     * that was SENT (or is PENDING) stays as it is: one per slot. Returns the
     * reminder written or taken back (`fresh`: PENDING now, new or taken back
     * from CANCELLED, so its delivery starts from the first attempt, or
     * FAILED, refused, so a job puts it in the dead set; otherwise SENDING,
     * its delivery job still its own: a call running, or one whose receiver
     * took it and whose SENT mark waits in that job), null when none was.
     */
    async writeReminder(id: string, startsAtMs: number): Promise<{ id: string; fresh: boolean } | null> {
      const slot = { appointmentId: id, startsAtMs };
      return (await writeReminders([slot])).get(slotKey(slot)) ?? null;
    },

    writeReminders,

    /**
     * What a slot's reminder job finds when it wrote nothing, for many slots
     * in one statement (one snapshot), by dedupe key: the slot's reminder row
     * if written (`live` unless withdrawn), and the appointment as it is now
     * (missing, not BOOKED, moved to another slot, or its remind time
     * `msToRemind` away by the database clock).
     */
    async reminderStates(slots: readonly ReminderSlot[]): Promise<Map<string, ReminderState>> {
      if (slots.length === 0) return new Map();
      const rows = await db.$queryRaw<(ReminderState & { key: string })[]>`
        SELECT s.key,
               CASE WHEN n.id IS NULL THEN NULL ELSE jsonb_build_object('id', n.id, 'status', n.status, 'live', ${liveSql(Prisma.sql`n`)}) END AS reminder,
               CASE WHEN a.id IS NULL THEN NULL ELSE jsonb_build_object(
                 'id', a.id, 'status', a.status, 'startsAt', a.starts_at, 'remindAt', a.remind_at,
                 'sameSlot', floor(extract(epoch FROM a.starts_at) * 1000)::bigint = s.ms,
                 'msToRemind', GREATEST(0, ceil(extract(epoch FROM a.remind_at - now()) * 1000))::int) END AS appointment
          FROM unnest(${slots.map((x) => x.appointmentId)}::uuid[], ${slots.map((x) => x.startsAtMs)}::bigint[], ${slots.map(slotKey)}::text[]) AS s(id, ms, key)
          LEFT JOIN appointments a ON a.id = s.id
          LEFT JOIN notifications n ON n.dedupe_key = s.key`;
      return new Map(
        rows.map(({ key, reminder, appointment }) => [
          key,
          {
            reminder,
            // jsonb gives times as text
            appointment: appointment && { ...appointment, startsAt: new Date(appointment.startsAt), remindAt: new Date(appointment.remindAt) },
          },
        ]),
      );
    },

    /** The reminder row of one slot, if written; `live` unless it was withdrawn (CANCELLED, or withdrawn while being sent). */
    async findReminder(id: string, startsAtMs: number): Promise<{ id: string; status: NotificationStatus; live: boolean } | null> {
      const rows = await db.$queryRaw<{ id: string; status: NotificationStatus; live: boolean }[]>`
        SELECT n.id, n.status::text AS status, ${liveSql(Prisma.sql`n`)} AS live
          FROM notifications n WHERE n.dedupe_key = ${dedupeKey.appointmentReminder(id, startsAtMs)}`;
      return rows[0] ?? null;
    },

    /**
     * BOOKED appointments without a live reminder (one not withdrawn) for
     * their current slot whose remind time passed more than `graceSeconds`
     * ago and whose start is ahead or less than `afterStartSeconds` behind
     * (overdue), or whose remind time comes within `horizonMs`; in remind
     * order after a keyset cursor. Each branch reads an index range that
     * holds only what is ahead, and of the overdue only those not marked
     * reminded (the partial index of them by remind time, its range bounded
     * below by the start window and the longest lead; the index of BOOKED
     * appointments by remind time for the upcoming), never the history behind
     * nor the bookings reminded already; each candidate's reminder row decides.
     */
    async listUnreminded(
      w: { graceSeconds: number; afterStartSeconds: number; horizonMs: number },
      after: { remindAt: Date; id: string } | null,
      limit: number,
    ) {
      const unreminded = Prisma.sql`(${after?.remindAt ?? null}::timestamptz IS NULL OR (a.remind_at, a.id) > (${after?.remindAt ?? null}::timestamptz, ${after?.id ?? null}::uuid))
            AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.dedupe_key = ${HELD_SLOT_KEY} AND ${liveSql(Prisma.sql`n`)})`;
      const columns = Prisma.sql`a.id, a.remind_at AS "remindAt", a.starts_at AS "startsAt"`;
      const startWindow = Prisma.sql`make_interval(secs => ${w.afterStartSeconds}::int)`;
      // No parallel workers: the planner, guessing thousands of rows where a
      // few dozen come, starts two and waits some 35 ms for them (1 000 000
      // appointments of history: 60 ms a pass with them, 11 ms without).
      const [, rows] = await db.$transaction([
        db.$executeRaw`SET LOCAL max_parallel_workers_per_gather = 0`,
        db.$queryRaw<{ id: string; remindAt: Date; startsAt: Date; overdue: boolean }[]>`
          (SELECT ${columns}, true AS overdue FROM appointments a
            WHERE a.status = 'BOOKED' AND ${UNMARKED} AND a.starts_at > now() - ${startWindow}
              AND a.remind_at < now() - make_interval(secs => ${w.graceSeconds}::int)
              -- Implied by the start (a remind time is at most the longest lead before it): bounds the index range.
              AND a.remind_at > now() - make_interval(secs => ${w.afterStartSeconds}::int + ${MAX_LEAD_SECONDS})
              AND ${unreminded}
            ORDER BY a.remind_at, a.id LIMIT ${limit})
          UNION ALL
          (SELECT ${columns}, false AS overdue FROM appointments a
            WHERE a.status = 'BOOKED' AND a.remind_at > now() AND a.remind_at <= now() + make_interval(secs => ${w.horizonMs}::double precision / 1000)
              AND ${unreminded}
            ORDER BY a.remind_at, a.id LIMIT ${limit})
          ORDER BY "remindAt", id
          LIMIT ${limit}`,
      ]);
      return rows;
    },

    /**
     * Retention, one kind per status: each batch reads the next appointments
     * (BOOKED by start, through the partial index of BOOKED ones; CANCELLED by
     * remind time) before the cutoff (database clock), and deletes those
     * whose slot lies behind it and that nothing changed since, with their
     * reminders, once none of those is left to deliver. Rows another
     * transaction holds are skipped, never waited for.
     */
    retention: [purgeOf(db, 'appointments BOOKED', PURGE_BOOKED), purgeOf(db, 'appointments CANCELLED', PURGE_CANCELLED)] as const,

    listReminders(id: string) {
      return db.notification.findMany({
        where: { appointmentId: id, kind: 'APPOINTMENT_REMINDER' },
        orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
      });
    },
  };
}

export type AppointmentsRepository = ReturnType<typeof createAppointmentsRepository>;
