// A reminder written while a move or cancellation of its slot waits for the
// appointment's row lock must still be withdrawn by that move or cancellation
// (found by the fault-injection suite: the withdrawal used the changing
// statement's own snapshot, taken before the reminder committed, and left the
// reminder PENDING, to be delivered for a slot given up).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { Db } from '../../../src/core/db.js';
import { DEFAULT_CLIENT } from '../../../src/core/auth/api-key-input.js';
import { createAppointmentsRepository } from '../../../src/modules/appointments/appointments.repository.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { gate } from '../../helpers/queues.js';
import { waitFor } from '../../helpers/redis.js';

let tdb: TestDb;
beforeAll(async () => {
  tdb = await createTestDb('appts_withdraw');
});
afterAll(async () => tdb?.drop());

/** A booked appointment whose remind time has come (lead longer than the time to its start). */
async function dueAppointment(repo: ReturnType<typeof createAppointmentsRepository>) {
  const startsAt = new Date(Date.now() + 30_000);
  const row = await repo.insert({
    id: randomUUID(),
    client: DEFAULT_CLIENT,
    customerId: 'w',
    contact: 'w@example.com',
    channel: 'EMAIL',
    startsAt,
    remindBeforeSeconds: 60,
    idempotencyKey: null,
    requestHash: null,
  });
  return { id: row!.id, startsAtMs: startsAt.getTime() };
}

/** How many statements of this database wait for a lock. */
async function lockWaiters(db: Db): Promise<number> {
  const [r] = await db.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
  );
  return r?.n ?? 0;
}

/**
 * Writes the slot's reminder with the service's own statement inside a
 * transaction held open (it holds the appointment's row lock), starts `change`,
 * waits until that blocks on the lock, then commits the reminder.
 */
async function remindWhile(id: string, startsAtMs: number, change: () => Promise<unknown>): Promise<string> {
  const written = gate();
  const release = gate();
  let reminderId: string | null = null;
  const writer = tdb.db.$transaction(async (tx) => {
    // The repository only issues raw statements, which the transaction client runs alike.
    reminderId = (await createAppointmentsRepository(tx as unknown as Db).writeReminder(id, startsAtMs))?.id ?? null;
    written.open();
    await release.promise;
  });
  await written.promise;
  const changing = change();
  expect(await waitFor(async () => (await lockWaiters(tdb.db)) > 0, 5_000, 20)).toBe(true);
  release.open();
  await writer;
  await changing;
  expect(reminderId).not.toBeNull();
  return reminderId as unknown as string;
}

describe('withdrawing a reminder written while its slot changes', () => {
  it('a move withdraws the old slot’s reminder committed while the move waited', async () => {
    const repo = createAppointmentsRepository(tdb.db);
    const a = await dueAppointment(repo);
    const reminderId = await remindWhile(a.id, a.startsAtMs, () => repo.reschedule(DEFAULT_CLIENT, a.id, new Date(a.startsAtMs + 60_000), null));
    const n = await tdb.db.notification.findUniqueOrThrow({ where: { id: reminderId } });
    expect(n.status).toBe('CANCELLED');
  });

  it('a cancellation withdraws the reminder committed while the cancellation waited', async () => {
    const repo = createAppointmentsRepository(tdb.db);
    const a = await dueAppointment(repo);
    const reminderId = await remindWhile(a.id, a.startsAtMs, () => repo.cancel(DEFAULT_CLIENT, a.id));
    const n = await tdb.db.notification.findUniqueOrThrow({ where: { id: reminderId } });
    expect(n.status).toBe('CANCELLED');
  });
});

describe('taking a reminder back while the delivery side ends it', () => {
  it('says fresh when the row it takes back was ended CANCELLED while the take-back waited for the appointment (its old job is gone or dead)', async () => {
    const repo = createAppointmentsRepository(tdb.db);
    const a = await dueAppointment(repo);
    const first = await repo.writeReminder(a.id, a.startsAtMs);
    expect(first).toMatchObject({ fresh: true });
    const id = first!.id;
    // Withdrawn during a call that never recorded its outcome (its worker died),
    // by a move away and back, which left the appointment unmarked.
    await tdb.db.$executeRawUnsafe(`UPDATE notifications SET status = 'SENDING', sending_at = now(), withdrawn_at = now() WHERE id = $1::uuid`, id);
    await tdb.db.$executeRawUnsafe(`UPDATE appointments SET updated_at = now() WHERE id = $1::uuid`, a.id);
    const release = gate();
    const locked = gate();
    const holder = tdb.db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`SELECT 1 FROM appointments WHERE id = $1::uuid FOR UPDATE`, a.id);
      locked.open();
      await release.promise;
    });
    await locked.promise;
    // The slot held again: the take-back's statement starts, and waits for the appointment.
    const takeBack = repo.writeReminder(a.id, a.startsAtMs);
    expect(await waitFor(async () => (await lockWaiters(tdb.db)) > 0, 5_000, 20)).toBe(true);
    // Meanwhile the relay gives the row up as withdrawn (its job died): CANCELLED.
    await tdb.db.$executeRawUnsafe(`UPDATE notifications SET status = 'CANCELLED' WHERE id = $1::uuid`, id);
    release.open();
    await holder;
    // Taken back from CANCELLED: a fresh delivery is owed (the row's job is dead), not one left to a job that is gone.
    expect(await takeBack).toEqual({ id, fresh: true });
    expect(await tdb.db.notification.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: 'PENDING', withdrawnAt: null, attempts: 0 });
  });
});
