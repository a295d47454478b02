// Retention of timers (RETENTION_DAYS): a timer untouched since the cutoff
// whose firings are all settled goes with every firing's row; a timer with a
// firing still to deliver, redriven, or changed since the cutoff stays.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeOf, runRetention } from '../../../src/core/retention.js';
import { PURGE_TIMERS } from '../../../src/modules/timers/sql/purge.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';

const DAYS = 30;
let tdb: TestDb;

beforeAll(async () => {
  tdb = await createTestDb('timers_retention');
});
afterAll(() => tdb.drop());

const ago = (days: number) => `now() - interval '${days} days'`;

/** A timer changed `changedDaysAgo`, with one firing per status given (the last its current one), each made `firedDaysAgo`. */
async function timer(key: string, changedDaysAgo: number, firings: { status: string; daysAgo: number; redrive?: boolean }[]): Promise<string> {
  const id = randomUUID();
  const rows = firings.map(() => randomUUID());
  await tdb.db.$transaction(async (tx) => {
    await tx.$executeRawUnsafe(
      `INSERT INTO timers (id, key, notification_id, firings, created_at, updated_at) VALUES ($1::uuid, $2, $3::uuid, $4, ${ago(changedDaysAgo)}, ${ago(changedDaysAgo)})`,
      id,
      key,
      rows.at(-1),
      firings.length,
    );
    for (const [i, f] of firings.entries()) {
      await tx.$executeRawUnsafe(
        `INSERT INTO notifications (id, kind, dedupe_key, timer_id, due_at, status, redrive_requested, created_at, payload)
         VALUES ($1::uuid, 'TIMER', 'timer:' || $2 || ':' || $3, $2::uuid, ${ago(f.daysAgo)}, $4::"NotificationStatus", $5, ${ago(f.daysAgo)}, '{}')`,
        rows[i],
        id,
        String(i + 1),
        f.status,
        f.redrive ?? false,
      );
    }
  });
  return id;
}

const exists = async (id: string) =>
  (await tdb.db.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM timers WHERE id = $1::uuid`, id))[0]?.n === 1;
const firingsOf = async (id: string) =>
  (await tdb.db.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM notifications WHERE timer_id = $1::uuid`, id))[0]?.n;

describe('timers retention', () => {
  it('deletes settled timers untouched since the cutoff with their firings, and only those', async () => {
    const old = await timer('old', 40, [
      { status: 'SENT', daysAgo: 45 },
      { status: 'FAILED', daysAgo: 41 },
    ]);
    const cancelled = await timer('cancelled', 35, [{ status: 'CANCELLED', daysAgo: 35 }]);
    const pending = await timer('pending', 40, [{ status: 'PENDING', daysAgo: 40 }]);
    const redriven = await timer('redriven', 40, [{ status: 'FAILED', daysAgo: 40, redrive: true }]);
    const recent = await timer('recent', 5, [{ status: 'SENT', daysAgo: 5 }]);
    const refired = await timer('refired', 40, [
      { status: 'SENT', daysAgo: 40 },
      { status: 'SENT', daysAgo: 2 },
    ]);

    const deleted = await runRetention({ olderThanSeconds: DAYS * 86_400, batchSize: 2, purges: [purgeOf(tdb.db, 'timers', PURGE_TIMERS)] }, 60_000);
    expect(deleted).toEqual({ timers: 2 });
    expect(await exists(old)).toBe(false);
    expect(await firingsOf(old)).toBe(0);
    expect(await exists(cancelled)).toBe(false);
    for (const kept of [pending, redriven, recent, refired]) expect(await exists(kept)).toBe(true);
    expect(await firingsOf(refired)).toBe(2);
  });
});
