// The timers' safety net, a periodic job (the relay): schedules again the
// delivery job of a firing past its fire time and still pending (its job was
// never scheduled, or Redis lost it), and settles a firing whose job was
// dead-lettered before it could record the outcome (FAILED). A firing whose
// job is there is delivered at its time and never read here: a pass reads
// only the firings overdue by more than a few seconds (normally none, and
// those waiting for a retry), whatever the number of timers waiting. A lost
// job costs its firing up to one interval.
import type { Db } from '../../core/db.js';
import type { Deliveries } from '../../core/delivery/index.js';
import { forEachPage } from '../../core/keyset.js';
import type { Logger } from '../../core/logger.js';
import type { PeriodicJob, Queue } from '../../queue/index.js';
import type { FiringPayload } from './sql/reads.js';
import { firingJob } from './timers.jobs.js';

export const TIMERS_RELAY_JOB = 'timers.relay';
export const TIMERS_RELAY_JOB_ID = 'timers:relay';

// A firing younger, or due more recently, than this may still be on its way
// from the schedule after commit, or being delivered.
const MIN_AGE_SECONDS = 5;
const PAGE = 1_000;

type Found = { id: string; dueAt: Date; firing: FiringPayload };

export function createTimersRelay(d: { db: Db; deliveries: Deliveries; queue: Queue; log: Logger; everyMs: number; sendingStaleSeconds: number }) {
  /** Pending firings overdue, in fire-time order after a cursor. */
  const duePending = (after: Found | null) =>
    d.db.$queryRaw<Found[]>`
      SELECT id, due_at AS "dueAt", payload AS firing FROM notifications
       WHERE timer_id IS NOT NULL AND status = 'PENDING'
         AND due_at < now() - make_interval(secs => ${MIN_AGE_SECONDS})
         AND created_at < now() - make_interval(secs => ${MIN_AGE_SECONDS})
         AND (${after === null} OR (due_at, id) > (${after?.dueAt ?? new Date(0)}, ${after?.id ?? '00000000-0000-0000-0000-000000000000'}::uuid))
       ORDER BY due_at, id LIMIT ${PAGE}`;
  /** Firings SENDING for longer than a live delivery takes: their worker was lost. */
  const staleSending = (after: Found | null) =>
    d.db.$queryRaw<Found[]>`
      SELECT id, due_at AS "dueAt", payload AS firing FROM notifications
       WHERE timer_id IS NOT NULL AND status = 'SENDING' AND sending_at < now() - make_interval(secs => ${d.sendingStaleSeconds})
         AND (${after === null} OR id > ${after?.id ?? '00000000-0000-0000-0000-000000000000'}::uuid)
       ORDER BY id LIMIT ${PAGE}`;

  async function run(): Promise<{ handed: number; abandoned: number }> {
    let handed = 0;
    let abandoned = 0;
    const handle = async (page: readonly Found[]) => {
      const r = await d.queue.scheduleMany(page.map((f) => firingJob({ rowId: f.id, dueAt: f.dueAt, firing: f.firing }, 'nx')));
      handed += r.filter((x) => x.status === 'created').length;
      abandoned += await d.deliveries.markAbandoned(
        page.filter((_, i) => r[i]?.status === 'dead').map((x) => x.id),
        d.sendingStaleSeconds,
      );
    };
    await forEachPage(duePending, handle);
    await forEachPage(staleSending, handle);
    if (handed > 0) d.log.warn({ handed }, 'timers relay scheduled deliveries that were missing');
    if (abandoned > 0) d.log.warn({ abandoned }, 'timers relay settled the firings of dead-lettered deliveries');
    return { handed, abandoned };
  }

  const job: PeriodicJob = { id: TIMERS_RELAY_JOB_ID, type: TIMERS_RELAY_JOB, schedule: { everyMs: d.everyMs }, run };
  return { run, job };
}
