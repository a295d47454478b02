// The outbox's dedupe keys are written in two forms, one per way of making
// them (TypeScript for one row, SQL over columns for many); both come from
// core/delivery/contract.ts and must spell the same key for the same event, or a row
// written one way would not be found (or deduplicated) the other.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dedupeKey, dedupeKeySql } from '../../../src/core/delivery/index.js';
import { Prisma } from '../../../src/generated/prisma/client.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';

let tdb: TestDb;
beforeAll(async () => {
  tdb = await createTestDb('outbox');
});
afterAll(async () => tdb?.drop());

describe('outbox dedupe keys', () => {
  it('are the same in TypeScript and in SQL', async () => {
    const id = randomUUID();
    const startsAt = new Date('2030-05-06T07:08:09.123Z');
    const uuid = Prisma.sql`${id}::uuid`;
    const [r] = await tdb.db.$queryRaw<{ order: string; reminder: string; batch: string; timer: string }[]>`
      SELECT ${dedupeKeySql.orderCancelled(uuid)} AS "order",
             ${dedupeKeySql.appointmentReminder(uuid, Prisma.sql`${startsAt}::timestamptz`)} AS reminder,
             ${dedupeKeySql.batchDispatched(uuid)} AS batch,
             ${dedupeKeySql.timerFiring(Prisma.sql`${uuid}::text`, Prisma.sql`(3)::text`)} AS timer`;
    expect(r).toEqual({
      order: dedupeKey.orderCancelled(id),
      reminder: dedupeKey.appointmentReminder(id, startsAt.getTime()),
      batch: dedupeKey.batchDispatched(id),
      timer: dedupeKey.timerFiring(id, 3),
    });
  });
});
