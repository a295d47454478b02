// The daily report: a cron job (DAILY_REPORT_CRON in DAILY_REPORT_TIMEZONE,
// by default 02:00 UTC) that sums up the previous local day of every domain
// (orders paid and cancelled, reminders, parcels and batches, notifications)
// into daily_reports; operators read them at GET /admin/reports.
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import { PERIODIC_JOB_OPTIONS, createModuleQueue } from '../../core/module-queue.js';
import type { ServiceModule } from '../../core/module.js';
import type { RedisClient } from '../../core/redis.js';
import type { PeriodicJob } from '../../queue/index.js';
import { type DailyReport, createReportsRepository, reportLookbackDays } from './reports.repository.js';

export const REPORTS_QUEUE = 'reports';
export const DAILY_JOB = 'reports.daily';
export const DAILY_JOB_ID = 'reports:daily';

export type ReportsModuleConfig = Pick<
  Config,
  | 'QUEUE_PREFIX'
  | 'QUEUE_SHARDS'
  | 'QUEUE_RECORD_GROUPS'
  | 'QUEUE_MAX_PAYLOAD_BYTES'
  | 'QUEUE_DEAD_RETENTION_DAYS'
  | 'QUEUE_DEAD_MAX_PER_SHARD'
  | 'DAILY_REPORT_CRON'
  | 'DAILY_REPORT_TIMEZONE'
>;

/** The local calendar day (YYYY-MM-DD, in `timezone`) before the one `at` falls on. */
export function dayBefore(at: number, timezone: string): string {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone: timezone, year: 'numeric', month: 'numeric', day: 'numeric' }).formatToParts(at);
  const part = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)?.value);
  // The local date as a UTC midnight, minus a day: plain calendar arithmetic.
  return new Date(Date.UTC(part('year'), part('month') - 1, part('day') - 1)).toISOString().slice(0, 10);
}

export function createReportsModule(deps: { db: Db; redis: RedisClient; config: ReportsModuleConfig; log: Logger }) {
  const { config } = deps;
  const log = deps.log.child({ module: 'reports' });
  const repo = createReportsRepository(deps.db, reportLookbackDays(config.QUEUE_DEAD_RETENTION_DAYS));
  const timezone = config.DAILY_REPORT_TIMEZONE;
  const queue = createModuleQueue(deps.redis, config, REPORTS_QUEUE, { [DAILY_JOB]: PERIODIC_JOB_OPTIONS });
  const daily: PeriodicJob = {
    id: DAILY_JOB_ID,
    type: DAILY_JOB,
    schedule: { cron: config.DAILY_REPORT_CRON, timezone },
    // A day's figures scan that day's rows and may take a while on a large
    // database; its queries do not stop on the signal, so an abandoned run
    // would go on beside the retry. An hour leaves room without letting a
    // hung run stop the schedule.
    maxRunMs: 60 * 60_000,
    // The day before the occurrence's local day: run again (a redelivery, a
    // retry, a catch-up after downtime) it computes the same day again.
    run: async ({ occurrence }) => {
      const report = await repo.generate(dayBefore(occurrence, timezone), timezone);
      log.info({ report }, 'daily report');
    },
  };
  const module: ServiceModule & { latest: (limit: number) => Promise<DailyReport[]>; generate: typeof repo.generate } = {
    name: 'reports',
    ...httpOf({ tag: 'reports', description: 'Daily reports are read through the admin API (GET /admin/reports).', routes: [] }),
    queue,
    handlers: {},
    periodic: [daily],
    // Fail the worker's start, naming the variable, rather than every run later.
    background: [
      {
        name: 'reports-timezone-check',
        start: async () => {
          try {
            await repo.checkTimezone(timezone);
          } catch (err) {
            throw new Error(`DAILY_REPORT_TIMEZONE: PostgreSQL does not know the time zone "${timezone}"`, { cause: err });
          }
        },
        stop: async () => {},
      },
    ],
    latest: (limit) => repo.latest(limit),
    generate: (day, tz) => repo.generate(day, tz),
  };
  return module;
}
