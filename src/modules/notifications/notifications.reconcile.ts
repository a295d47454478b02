// The notifications' safety net, a periodic job (the relay): hands over rows
// whose delivery job never got scheduled (a lost dispatch) or was lost with
// Redis data, and settles rows whose job was dead-lettered before it could
// record the outcome (its workers crashed on every attempt, or the database
// was down when the last attempt failed): FAILED, or CANCELLED when their
// subject withdrew them, instead of PENDING for ever.
import type { Deliveries } from '../../core/delivery/index.js';
import { forEachPage } from '../../core/keyset.js';
import type { Logger } from '../../core/logger.js';
import type { PeriodicJob, Queue } from '../../queue/index.js';
import { scheduleDeliveries } from './notifications.jobs.js';
import type { NotificationsRepository } from './notifications.repository.js';

export const RELAY_JOB = 'notifications.relay';
export const RELAY_JOB_ID = 'notifications:relay';

// A row younger than this may still be on its way from the dispatch after commit.
const MIN_AGE_SECONDS = 5;
const PAGE = 1_000;

export function createNotificationsRelay(d: {
  repo: NotificationsRepository;
  deliveries: Deliveries;
  queue: Queue;
  log: Logger;
  everyMs: number;
  /** A delivery still SENDING after this long (s) has lost its worker. */
  sendingStaleSeconds: number;
}) {
  async function run(): Promise<{ handed: number; abandoned: number }> {
    let handed = 0;
    let abandoned = 0;
    await forEachPage(
      (after: { createdAt: Date; id: string } | null) => d.repo.listUnsettled(MIN_AGE_SECONDS, d.sendingStaleSeconds, after, PAGE),
      async (page) => {
        const r = await scheduleDeliveries(
          d.queue,
          page.map((x) => x.id),
          'nx',
          new Map(page.map((x) => [x.id, x.kind])),
        );
        handed += r.filter((x) => x.status === 'created').length;
        abandoned += await d.deliveries.markAbandoned(
          page.filter((_, i) => r[i]?.status === 'dead').map((x) => x.id),
          d.sendingStaleSeconds,
        );
      },
    );
    if (handed > 0) d.log.warn({ handed }, 'notification relay scheduled deliveries that were missing');
    if (abandoned > 0) d.log.warn({ abandoned }, 'notification relay settled the rows of dead-lettered deliveries');
    return { handed, abandoned };
  }

  const job: PeriodicJob = { id: RELAY_JOB_ID, type: RELAY_JOB, schedule: { everyMs: d.everyMs }, run };
  return { run, job };
}
