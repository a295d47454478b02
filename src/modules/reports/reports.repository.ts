// SQL of the daily report: one statement computes a local calendar day's
// figures from the domains' tables, for all clients and for each client with
// any row that day, and stores them under (day, time zone),
// replacing an earlier run of the same day, so a repeated run is harmless.
// It reads the rows made on that day (orders and parcels: or within the
// lookback before it) by each table's index on creation time, and the
// notifications sent on it by the index of sends, never the whole history.
import { Prisma } from '../../generated/prisma/client.js';
import type { Db } from '../../core/db.js';
import { NOTIFICATION_STATUSES, type NotificationKind } from '../../core/delivery/index.js';

/** The reminders' kind, spelled by the outbox's list (core/delivery/contract.ts). */
const REMINDER_KIND = Prisma.raw(`'${'APPOINTMENT_REMINDER' satisfies NotificationKind}'`);

/** One day's figures, of every client together or of one. */
export type ClientFigures = {
  orders: { created: number; paid: number; paidCents: number; cancelledTimeout: number; cancelledCustomer: number };
  reminders: { written: number; sent: number; failed: number };
  notifications: { sent: number; failed: number };
  parcels: { received: number; batched: number; maxWaitSeconds: number | null; avgWaitSeconds: number | null };
  batches: { full: number; timeout: number };
};

/** Every client's figures together, and each client's with any row that day. */
export type DailyFigures = ClientFigures & { clients: Record<string, ClientFigures> };

export type DailyReport = { day: string; timezone: string; figures: DailyFigures; generatedAt: Date };

type Row = { day: string; timezone: string; figures: DailyFigures; generated_at: Date };

const toReport = (r: Row): DailyReport => ({ day: r.day, timezone: r.timezone, figures: r.figures, generatedAt: r.generated_at });

/** Every status of a table, so its (status, created_at) index serves a range of creation times. */
const ALL_NOTIFICATION_STATUSES = Prisma.raw(NOTIFICATION_STATUSES.map((s) => `'${s}'`).join(', '));
const ALL_PARCEL_STATUSES = Prisma.raw(`'WAITING', 'BATCHED'`);

/**
 * How many days before its day the report looks for orders and parcels whose
 * event fell on it: an order is paid or cancelled within its payment window
 * (at most 7 days) of its creation, or by its expiry job redriven from the
 * dead letters (kept `deadRetentionDays`); a parcel is batched within its
 * area's longest wait (at most a day); one day more for lateness. An event
 * later than that (an outage of more than a day past a deadline) is not
 * counted on its day. Notifications need none: their sends have an index.
 */
export const reportLookbackDays = (deadRetentionDays: number): number => Math.max(7, deadRetentionDays) + 1;

export function createReportsRepository(db: Db, lookbackDays: number) {
  return {
    /** Computes and stores the figures of `day` (YYYY-MM-DD) in `timezone`: [local midnight, next local midnight). */
    async generate(day: string, timezone: string): Promise<DailyReport> {
      // The bounds as expressions of the parameters (not columns of a CTE), so each table's index takes them.
      const lo = Prisma.sql`(${day}::date)::timestamp AT TIME ZONE ${timezone}`;
      const hi = Prisma.sql`(${day}::date + 1)::timestamp AT TIME ZONE ${timezone}`;
      const from = Prisma.sql`(${day}::date - ${lookbackDays}::int)::timestamp AT TIME ZONE ${timezone}`;
      // Each part is counted per client and for all (GROUPING SETS: the row
      // whose client is NULL is the total), in the one pass over its rows.
      const perClient = Prisma.sql`GROUP BY GROUPING SETS ((client), ())`;
      const [row] = await db.$queryRaw<Row[]>`
        WITH b AS (
          SELECT ${lo} AS lo, ${hi} AS hi
        ), o AS (
          SELECT client,
                 count(*) FILTER (WHERE created_at >= lo AND created_at < hi) AS created,
                 count(*) FILTER (WHERE paid_at >= lo AND paid_at < hi) AS paid,
                 coalesce(sum(total_cents) FILTER (WHERE paid_at >= lo AND paid_at < hi), 0) AS paid_cents,
                 count(*) FILTER (WHERE cancelled_at >= lo AND cancelled_at < hi AND cancel_reason = 'PAYMENT_TIMEOUT') AS c_timeout,
                 count(*) FILTER (WHERE cancelled_at >= lo AND cancelled_at < hi AND cancel_reason = 'CUSTOMER') AS c_customer
            FROM orders, b
           WHERE created_at >= ${from} AND created_at < ${hi}
           ${perClient}
        ), n AS (
          SELECT client,
                 count(*) FILTER (WHERE kind = ${REMINDER_KIND}) AS r_written,
                 count(*) FILTER (WHERE kind = ${REMINDER_KIND} AND status = 'FAILED') AS r_failed,
                 count(*) FILTER (WHERE status = 'FAILED') AS failed
            FROM notifications
           WHERE status IN (${ALL_NOTIFICATION_STATUSES}) AND created_at >= ${lo} AND created_at < ${hi}
           ${perClient}
        ), s AS (
          -- Sent on the day, whenever written (a reminder taken back weeks later, a redrive): by the index of sends.
          SELECT client, count(*) FILTER (WHERE kind = ${REMINDER_KIND}) AS r_sent, count(*) AS sent
            FROM notifications
           WHERE sent_at >= ${lo} AND sent_at < ${hi}
           ${perClient}
        ), p AS (
          SELECT client,
                 count(*) FILTER (WHERE created_at >= lo AND created_at < hi) AS received,
                 count(*) FILTER (WHERE batched_at >= lo AND batched_at < hi) AS batched,
                 max(extract(epoch FROM batched_at - created_at)) FILTER (WHERE batched_at >= lo AND batched_at < hi) AS max_wait,
                 avg(extract(epoch FROM batched_at - created_at)) FILTER (WHERE batched_at >= lo AND batched_at < hi) AS avg_wait
            FROM parcels, b
           WHERE status IN (${ALL_PARCEL_STATUSES}) AND created_at >= ${from} AND created_at < ${hi}
           ${perClient}
        ), t AS (
          SELECT client, count(*) FILTER (WHERE reason = 'FULL') AS full_batches, count(*) FILTER (WHERE reason = 'TIMEOUT') AS timeout_batches
            FROM batches, b WHERE created_at >= lo AND created_at < hi
           ${perClient}
        ), k AS (
          -- NULL (all clients) always, then every client with a row in any part.
          SELECT NULL::varchar AS client
          UNION SELECT client FROM o UNION SELECT client FROM n UNION SELECT client FROM s
          UNION SELECT client FROM p UNION SELECT client FROM t
        ), f AS (
          SELECT k.client, jsonb_build_object(
                   'orders', jsonb_build_object('created', coalesce(o.created, 0), 'paid', coalesce(o.paid, 0),
                                                'paidCents', coalesce(o.paid_cents, 0), 'cancelledTimeout', coalesce(o.c_timeout, 0),
                                                'cancelledCustomer', coalesce(o.c_customer, 0)),
                   'reminders', jsonb_build_object('written', coalesce(n.r_written, 0), 'sent', coalesce(s.r_sent, 0),
                                                   'failed', coalesce(n.r_failed, 0)),
                   'notifications', jsonb_build_object('sent', coalesce(s.sent, 0), 'failed', coalesce(n.failed, 0)),
                   'parcels', jsonb_build_object('received', coalesce(p.received, 0), 'batched', coalesce(p.batched, 0),
                                                 'maxWaitSeconds', round(p.max_wait::numeric, 3), 'avgWaitSeconds', round(p.avg_wait::numeric, 3)),
                   'batches', jsonb_build_object('full', coalesce(t.full_batches, 0), 'timeout', coalesce(t.timeout_batches, 0))) AS figures
            FROM k
            LEFT JOIN o ON o.client IS NOT DISTINCT FROM k.client
            LEFT JOIN n ON n.client IS NOT DISTINCT FROM k.client
            LEFT JOIN s ON s.client IS NOT DISTINCT FROM k.client
            LEFT JOIN p ON p.client IS NOT DISTINCT FROM k.client
            LEFT JOIN t ON t.client IS NOT DISTINCT FROM k.client
        )
        INSERT INTO daily_reports (day, timezone, figures, generated_at)
        SELECT ${day}::date, ${timezone},
               (SELECT figures FROM f WHERE client IS NULL)
                 || jsonb_build_object('clients', coalesce((SELECT jsonb_object_agg(client, figures) FROM f WHERE client IS NOT NULL), '{}'::jsonb)),
               now()
        ON CONFLICT (day, timezone) DO UPDATE SET figures = EXCLUDED.figures, generated_at = EXCLUDED.generated_at
        RETURNING to_char(day, 'YYYY-MM-DD') AS day, timezone, figures, generated_at`;
      return toReport(row as Row);
    },

    /** Throws unless PostgreSQL knows the time zone (it knows fewer names than Node's Intl). */
    async checkTimezone(timezone: string): Promise<void> {
      await db.$queryRaw`SELECT now() AT TIME ZONE ${timezone}`;
    },

    /** The latest reports, newest day first. */
    async latest(limit: number): Promise<DailyReport[]> {
      const rows = await db.$queryRaw<Row[]>`
        SELECT to_char(day, 'YYYY-MM-DD') AS day, timezone, figures, generated_at
          FROM daily_reports ORDER BY day DESC, timezone LIMIT ${limit}`;
      return rows.map(toReport);
    },
  };
}

export type ReportsRepository = ReturnType<typeof createReportsRepository>;
