// The appointments' safety net, a periodic job, per lead: reminders overdue
// past the grace (none written for the slot and lead held) of appointments not
// yet started (or started less than `afterStartSeconds` ago) are written right
// here, whatever became of their job; reminders due within the next two
// intervals get their job set to the slot held (upsert, so a job left at an
// old slot is corrected). Later ones wait until they enter that window, which
// keeps each pass small.
import { forEachPage } from '../../core/keyset.js';
import type { Logger } from '../../core/logger.js';
import type { PeriodicJob, Queue } from '../../queue/index.js';
import type { AppointmentsRepository } from './appointments.repository.js';
import type { AppointmentsService } from './appointments.service.js';
import { reminderJob } from './appointments.job-ids.js';

export const RECONCILE_JOB = 'appointments.reconcile';
export const RECONCILE_JOB_ID = 'appointments:reconcile';

const PAGE = 1_000;

type Unreminded = Awaited<ReturnType<AppointmentsRepository['listUnreminded']>>[number];

export function createAppointmentsReconcile(d: {
  repo: AppointmentsRepository;
  service: Pick<AppointmentsService, 'remindMany'>;
  queue: Queue;
  log: Logger;
  /** How late a reminder may be before the pass writes it itself. */
  graceSeconds: number;
  /** How long after its appointment's start an overdue reminder is still written. */
  afterStartSeconds: number;
  everyMs: number;
}) {
  async function run(horizonMs: number): Promise<{ written: number; jobsSet: number }> {
    let written = 0;
    let jobsSet = 0;
    await forEachPage(
      (after: Unreminded | null) => d.repo.listUnreminded({ graceSeconds: d.graceSeconds, afterStartSeconds: d.afterStartSeconds, horizonMs }, after, PAGE),
      async (page) => {
        const now = Date.now();
        // An overdue appointment's leads due: written (a live one not marked is marked again, so the pass lets it be).
        const overdue = page
          .filter((x) => x.overdue)
          .flatMap((a) =>
            a.leads.filter((l) => l.at.getTime() <= now).map((l) => ({ appointmentId: a.id, startsAtMs: a.startsAt.getTime(), leadSeconds: l.lead })),
          );
        if (overdue.length > 0) {
          (await d.service.remindMany(overdue)).forEach((r, i) => {
            if (r.ok && r.value.kind === 'written') written++;
            if (!r.ok)
              d.log.error({ err: r.error, appointmentId: overdue[i]!.appointmentId }, 'appointments reconciliation could not write an overdue reminder');
          });
        }
        // Leads coming within the horizon, of either kind of appointment, without their reminder: their jobs set.
        const upcoming = page.flatMap((a) =>
          a.leads.filter((l) => !l.live && l.at.getTime() > now && l.at.getTime() <= now + horizonMs).map((l) => reminderJob(a, l.lead, l.at)),
        );
        if (upcoming.length === 0) return;
        await d.queue.scheduleMany(upcoming);
        jobsSet += upcoming.length;
      },
    );
    if (written) d.log.warn({ written }, 'appointments reconciliation wrote overdue reminders');
    return { written, jobsSet };
  }

  const job: PeriodicJob = { id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs: d.everyMs }, run: () => run(2 * d.everyMs) };
  return { run, job };
}
