// The reminder write behind the appointments' jobs and their reconciliation
// pass: for many (slot, lead) pairs at once, the reminder of every slot still
// held and due is written in one statement and handed to delivery; for the
// rest, why not (already written, moved, no longer booked or held, not due).
// Idempotent: a second run of a job finds its reminder written.
import { type Settled, settleEach } from '../../core/gather.js';
import { isDatabaseUnavailable } from '../../core/db-errors.js';
import type { Logger } from '../../core/logger.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import { afterCommit } from '../../core/redis-call.js';
import type { Queue } from '../../queue/index.js';
import { type AppointmentsRepository, type ReminderSlot, slotKey } from './appointments.repository.js';
import { reminderJob } from './appointments.job-ids.js';

/** Reminders written one by one at once at most, when their shared statement failed. */
const EACH_AT_ONCE = 10;

/** `not_held`: the slot is held but its lead is no longer planned (dropped, or skipped). */
export type RemindResult =
  { kind: 'written' } | { kind: 'already_written' } | { kind: 'not_due'; inMs: number } | { kind: 'moved' } | { kind: 'not_booked' } | { kind: 'not_held' };

/** remindMany: an outcome per slot, in order. */
export function createReminderWriter(d: { repo: AppointmentsRepository; queue: Queue; dispatch: NotificationDispatch; log: Logger }) {
  const { repo, queue, log } = d;

  /**
   * The write of remindMany: one statement for all the slots; if it fails
   * for another reason than the database being away (a deadlock, a slot the
   * statement cannot take), slot by slot, a few at a time, so one slot's
   * failure stays its own: what was written, and the error of each slot
   * whose own write failed.
   */
  async function writeAll(slots: readonly ReminderSlot[]) {
    try {
      return { written: await repo.writeReminders(slots), failed: new Map<string, unknown>() };
    } catch (err) {
      if (slots.length === 1 || isDatabaseUnavailable(err)) throw err;
      const written = new Map<string, { id: string; fresh: boolean }>();
      const failed = new Map<string, unknown>();
      for (let i = 0; i < slots.length; i += EACH_AT_ONCE) {
        const chunk = slots.slice(i, i + EACH_AT_ONCE);
        (await settleEach(chunk, (slot) => repo.writeReminders([slot]))).forEach((r, j) => {
          if (r.ok) for (const [key, w] of r.value) written.set(key, w);
          else failed.set(slotKey(chunk[j]!), r.error);
        });
      }
      return { written, failed };
    }
  }

  /**
   * The reminder jobs of many slots (a batch of them, the pass's overdue
   * page): one statement writes the reminder of every slot still held and
   * due, whose deliveries are then handed over together; the slots it wrote
   * nothing for are looked at in one more statement. An outcome per slot, in
   * order (a slot whose write failed on its own: its error). It throws when
   * the deliveries could not be handed over: the jobs run again and find
   * their reminders written, to be handed over then.
   */
  return async function remindMany(slots: readonly ReminderSlot[]): Promise<Settled<RemindResult>[]> {
    const { written, failed } = await writeAll(slots);
    // Fresh: a reminder taken back from CANCELLED may still have the job of
    // its earlier delivery (dead, or waiting out a backoff); a refused one
    // (FAILED) needs a job to reach the dead set. One still SENDING keeps
    // its job: a call may be running, or the receiver took it and that job
    // holds its SENT mark (replacing it would call the receiver again).
    const ws = [...written.values()];
    await d.dispatch(
      ws.filter((w) => w.fresh).map((w) => w.id),
      { fresh: true, kind: 'APPOINTMENT_REMINDER' },
    );
    await d.dispatch(
      ws.filter((w) => !w.fresh).map((w) => w.id),
      { kind: 'APPOINTMENT_REMINDER' },
    );
    const states = await repo.reminderStates(slots.filter((s) => !written.has(slotKey(s)) && !failed.has(slotKey(s))));
    const redispatch: string[] = [];
    const moved: { slot: ReminderSlot; startsAt: Date; at: Date }[] = [];
    const results = slots.map((slot): Settled<RemindResult> | RemindResult => {
      if (failed.has(slotKey(slot))) return { ok: false, error: failed.get(slotKey(slot)) };
      if (written.has(slotKey(slot))) return { kind: 'written' };
      const { reminder, appointment: a } = states.get(slotKey(slot)) ?? { reminder: null, appointment: null };
      // A withdrawn reminder does not count: its slot is not held now (or the
      // write would have taken it back), and it may be held again later.
      if (reminder?.live) {
        // A redelivery after a crash between the write and the dispatch (or a
        // dispatch that failed): a reminder taken back may still have its
        // earlier delivery's dead job (replaced); one whose delivery waits out
        // a backoff keeps it, its attempts counted.
        if (reminder.status === 'PENDING') redispatch.push(reminder.id);
        return { kind: 'already_written' };
      }
      if (!a || a.status !== 'BOOKED') return { kind: 'not_booked' };
      // The lead is no longer planned on the slot held (dropped, or skipped): nothing to remind of.
      if (!a.remindAt) return { kind: 'not_held' };
      // This job carried an old slot (two reschedules raced their queue
      // updates): the job is made to follow the slot the database holds.
      if (!a.sameSlot) {
        moved.push({ slot, startsAt: a.startsAt, at: a.remindAt });
        return { kind: 'moved' };
      }
      // Not due yet by the database clock (clock skew, or a job left at an
      // older, earlier remind time when its move did not reach Redis): come
      // back then, as far ahead as the database's own clock says.
      return { kind: 'not_due', inMs: a.msToRemind };
    });
    await d.dispatch(redispatch, { revive: true, kind: 'APPOINTMENT_REMINDER' });
    await Promise.all(
      moved.map((m) =>
        afterCommit(
          () => queue.schedule(reminderJob({ id: m.slot.appointmentId, startsAt: m.startsAt }, m.slot.leadSeconds ?? null, m.at)),
          'schedule reminder',
          log,
          { appointmentId: m.slot.appointmentId },
          'the reconciliation pass will create the job',
        ),
      ),
    );
    return results.map((r) => ('ok' in r ? r : { ok: true, value: r }));
  };
}
