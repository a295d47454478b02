// The "reminded" mark of an appointment: set by the statement that writes or
// takes back the reminder of its slot, gone with any change of the booking (a
// trigger: whichever statement, or version of the service, makes it). The
// appointments pass reads only unmarked bookings, so a mark must never stand
// for a slot without a live reminder: each transition of the slot's reminder
// is followed here, and the pass's query is asked at each step.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CLIENT } from '../../../src/core/auth/api-key-input.js';
import { createAppointmentsRepository } from '../../../src/modules/appointments/appointments.repository.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { gate } from '../../helpers/queues.js';

let tdb: TestDb;
beforeAll(async () => {
  tdb = await createTestDb('appointments_marker');
});
afterAll(() => tdb.drop());

const HOUR = 3_600_000;

describe('the reminded mark', () => {
  it('follows the slot: set with its reminder, gone with any change of the booking, set again when the reminder is written or taken back', async () => {
    const repo = createAppointmentsRepository(tdb.db);
    const marked = async (id: string) =>
      (await tdb.db.$queryRawUnsafe<{ m: boolean | null }[]>('SELECT reminded AS m FROM appointments WHERE id = $1::uuid', id))[0]!.m === true;
    // Candidates of the pass: overdue (grace 0) and not started.
    const candidates = async () => (await repo.listUnreminded({ graceSeconds: 0, afterStartSeconds: 300, horizonMs: 0 }, null, 1_000)).map((r) => r.id);
    const pause = () => new Promise((r) => setTimeout(r, 20)); // a remind time of now() is overdue a moment later

    const id = randomUUID();
    const s = new Date(Math.floor(Date.now() / 1_000) * 1_000 + HOUR);
    // Booked inside its lead: its remind time is the booking time.
    expect(
      await repo.insert({
        id,
        client: DEFAULT_CLIENT,
        customerId: 'm',
        contact: 'm@example.com',
        channel: 'EMAIL',
        startsAt: s,
        remindBeforeSeconds: 7_200,
        idempotencyKey: null,
        requestHash: null,
      }),
    ).not.toBeNull();
    await pause();
    expect(await marked(id)).toBe(false);
    expect(await candidates()).toContain(id);

    // Written: marked for its slot, no candidate any more.
    expect(await repo.writeReminder(id, s.getTime())).toMatchObject({ fresh: true });
    expect(await marked(id)).toBe(true);
    expect(await candidates()).not.toContain(id);
    // Written again (a redelivered job): nothing new, still marked.
    expect(await repo.writeReminder(id, s.getTime())).toBeNull();
    expect(await marked(id)).toBe(true);

    // A new lead, same slot: the reminder stays; the mark goes with the change,
    // so the pass checks it again, and finds its reminder.
    expect(await repo.reschedule(DEFAULT_CLIENT, id, null, 7_000)).not.toBeNull();
    expect(await marked(id)).toBe(false);
    expect((await repo.findReminder(id, s.getTime()))?.live).toBe(true);
    await pause();
    expect(await candidates()).not.toContain(id);
    // Written again by the pass or a job: marked again.
    expect(await repo.writeReminder(id, s.getTime())).toBeNull();
    expect(await marked(id)).toBe(true);

    // Moved: the reminder withdrawn, the mark cleared, a candidate for the new slot.
    const s2 = new Date(s.getTime() + 60_000); // inside its lead too
    expect(await repo.reschedule(DEFAULT_CLIENT, id, s2, null)).not.toBeNull();
    expect(await marked(id)).toBe(false);
    expect((await repo.findReminder(id, s.getTime()))?.live).toBe(false);
    await pause();
    expect(await candidates()).toContain(id);

    // Moved back: the old slot's reminder is withdrawn, so unmarked, a candidate...
    expect(await repo.reschedule(DEFAULT_CLIENT, id, s, null)).not.toBeNull();
    expect(await marked(id)).toBe(false);
    await pause();
    expect(await candidates()).toContain(id);
    // ...until its reminder is taken back.
    expect(await repo.writeReminder(id, s.getTime())).toMatchObject({ fresh: true });
    expect((await repo.findReminder(id, s.getTime()))?.live).toBe(true);
    expect(await marked(id)).toBe(true);
    expect(await candidates()).not.toContain(id);

    // A write for a slot it no longer has marks nothing.
    expect(await repo.writeReminder(id, s2.getTime())).toBeNull();
    expect(await marked(id)).toBe(true);

    // A slot moved by any statement, one leaving updated_at as it was too (two
    // moves within a millisecond; an older version of the service): unmarked.
    await tdb.db.$executeRawUnsafe(`UPDATE appointments SET starts_at = starts_at + interval '1 second' WHERE id = $1::uuid`, id);
    expect(await marked(id)).toBe(false);
    await tdb.db.$executeRawUnsafe(`UPDATE appointments SET starts_at = starts_at - interval '1 second' WHERE id = $1::uuid`, id);
    expect(await repo.writeReminder(id, s.getTime())).toBeNull(); // live already: nothing new
    expect(await marked(id)).toBe(true);

    // Cancelled: no candidate, marked or not.
    expect(await repo.cancel(DEFAULT_CLIENT, id)).not.toBeNull();
    expect(await candidates()).not.toContain(id);
  });

  it("leaves a slot's live reminder unlocked when its job comes again: a batch never waits on a row a delivery holds (review of 59e9d54: a deadlock)", async () => {
    const repo = createAppointmentsRepository(tdb.db);
    const s = new Date(Math.floor(Date.now() / 1_000) * 1_000 + HOUR);
    const ids = [randomUUID(), randomUUID()];
    for (const id of ids) {
      await repo.insert({
        id,
        client: DEFAULT_CLIENT,
        customerId: 'm2',
        contact: 'm2@example.com',
        channel: 'EMAIL',
        startsAt: s,
        remindBeforeSeconds: 7_200,
        idempotencyKey: null,
        requestHash: null,
      });
    }
    const slots = ids.map((appointmentId) => ({ appointmentId, startsAtMs: s.getTime() }));
    const written = await repo.writeReminders(slots);
    expect(written.size).toBe(2);
    // A delivery's claim holds one of the two reminders while both jobs come again.
    const held = [...written.values()][0]!.id;
    const locked = gate();
    const release = gate();
    const holder = tdb.db.$transaction(async (tx) => {
      await tx.$queryRawUnsafe('SELECT id FROM notifications WHERE id = $1::uuid FOR UPDATE', held);
      locked.open();
      await release.promise;
    });
    await locked.promise;
    try {
      const again = repo.writeReminders(slots);
      // Answered while the row is still held (before: it waited for it, locking the appointments meanwhile).
      expect(await Promise.race([again, new Promise((r) => setTimeout(() => r('waited'), 5_000))])).toEqual(new Map());
    } finally {
      release.open();
      await holder;
    }
    const marks = await tdb.db.$queryRawUnsafe<{ m: boolean }[]>('SELECT reminded AS m FROM appointments WHERE id = ANY($1::uuid[])', ids);
    expect(marks.map((x) => x.m)).toEqual([true, true]);
  });
});
