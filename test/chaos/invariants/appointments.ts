// The reminders invariant, read from PostgreSQL once the system has settled,
// against the slots each appointment held (from the driver): at most one
// reminder per slot, never one for a slot the appointment did not hold when it
// was written (never held, before its remind time, after it was given up), and
// exactly one, delivered, for every slot held long enough past its remind time
// that the service owed it.
import type { Db } from '../../../src/core/db.js';
import type { Slot } from '../drivers/appointments.js';
import { type Checked, type Counts, checkDeliveries, problemLog } from './counts.js';

export type RemindersReport = Counts & {
  /** Reminders written for a slot not held at that moment. */
  wrongSlot: number;
  /** Slots given up too close to their remind time to owe a reminder, and how many of those got one anyway (allowed). */
  optional: number;
  optionalReminded: number;
  /** Reminders withdrawn (CANCELLED) before delivery because their slot was given up. */
  withdrawn: number;
  /** Deliveries of a reminder beyond its first (same Idempotency-Key). */
  resent: number;
};

// Clocks of this process and of PostgreSQL on one machine; timestamps stored to the ms.
const CLOCK_SLACK_MS = 5;

export async function checkReminders(
  db: Db,
  history: ReadonlyMap<string, readonly Slot[]>,
  received: ReadonlyMap<string, number>,
  /** A slot held at least this long past its remind time must have its reminder. */
  mustRemindAfterMs: number,
): Promise<Checked<RemindersReport>> {
  const problems = problemLog();
  const notes = await db.notification.findMany({
    where: { kind: 'APPOINTMENT_REMINDER' },
    select: { id: true, appointmentId: true, payload: true, createdAt: true, status: true },
  });
  const byAppointment = new Map<string, typeof notes>();
  for (const n of notes) byAppointment.set(n.appointmentId as string, [...(byAppointment.get(n.appointmentId as string) ?? []), n]);

  let wrongSlot = 0;
  let optional = 0;
  let optionalReminded = 0;
  let duplicatedOptional = 0;
  let lostOptional = 0;
  const owed = new Map<string, { id: string; status: string }[]>();
  for (const [id, slots] of history) {
    const got = byAppointment.get(id) ?? [];
    for (const n of got) {
      const s = slots.find((x) => x.startsAt === (n.payload as { startsAt: string }).startsAt);
      const at = n.createdAt.getTime();
      let wrong: string | null = null;
      if (!s) wrong = 'for a slot it never held';
      else if (at < s.remindAt - CLOCK_SLACK_MS) wrong = `${s.remindAt - at} ms before its remind time`;
      else if (at > s.heldUntilHigh + CLOCK_SLACK_MS) wrong = `${at - s.heldUntilHigh} ms after the slot was given up`;
      if (wrong) {
        wrongSlot++;
        problems.add(`appointment ${id}: reminder ${wrong}`);
      }
    }
    for (const s of slots) {
      const rows = got.filter((n) => (n.payload as { startsAt: string }).startsAt === s.startsAt);
      if (s.heldUntilLow - s.remindAt >= mustRemindAfterMs) {
        owed.set(`appointment ${id} slot ${s.startsAt}`, rows);
        continue;
      }
      optional++;
      if (rows.length === 0) continue;
      optionalReminded++;
      if (rows.length > 1) {
        duplicatedOptional += rows.length - 1;
        problems.add(`appointment ${id}: ${rows.length} reminders for slot ${s.startsAt}`);
      }
      const n = rows[0] as (typeof rows)[number];
      // Given up after it was written: delivered (SENT and received) or withdrawn, never stuck or marked sent unseen.
      if (n.status === 'CANCELLED') continue;
      if (n.status !== 'SENT' || !received.has(n.id)) {
        lostOptional++;
        problems.add(`appointment ${id}: reminder ${n.id} for a given-up slot is ${n.status}, received ${received.get(n.id) ?? 0} times`);
      }
    }
  }
  const d = checkDeliveries(owed, received, problems);
  return {
    expected: d.expected,
    seen: d.seen,
    lost: d.lost + lostOptional,
    duplicated: d.duplicated + duplicatedOptional,
    wrongSlot,
    optional,
    optionalReminded,
    withdrawn: notes.filter((n) => n.status === 'CANCELLED').length,
    resent: d.resent,
    problems: problems.examples,
  };
}
