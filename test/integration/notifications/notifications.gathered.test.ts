// Deliveries running at once share their claims and SENT marks: one statement
// for many rows, each row judged as a claim of its own would judge it, and a
// row the statement cannot take failing alone.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../../src/core/db-errors.js';
import { gatherOrEach } from '../../../src/core/gather.js';
import { createDeliveries } from '../../../src/core/delivery/index.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { failNotificationWrites } from '../../helpers/db-faults.js';

let tdb: TestDb;
beforeAll(async () => {
  tdb = await createTestDb('notifications_gathered');
});
afterAll(async () => {
  await tdb?.drop();
});

const STALE_MS = 60_000;

async function row(set: string): Promise<string> {
  const id = randomUUID();
  await tdb.db.$executeRawUnsafe(`INSERT INTO notifications (id, kind, dedupe_key, payload) VALUES ($1::uuid, 'ORDER_CANCELLED', $2, '{}')`, id, `test:${id}`);
  if (set) await tdb.db.$executeRawUnsafe(`UPDATE notifications SET ${set} WHERE id = $1::uuid`, id);
  return id;
}

describe('gathered delivery statements', () => {
  it('claims many rows in one statement, each answered as a claim of its own would be', async () => {
    const repo = createDeliveries(tdb.db);
    const rows = {
      pending: await row(''),
      sent: await row(`status = 'SENT'`),
      busy: await row(`status = 'SENDING', sending_at = now()`),
      stale: await row(`status = 'SENDING', sending_at = now() - interval '1 hour'`),
      failed: await row(`status = 'FAILED'`),
      redriven: await row(`status = 'FAILED', redrive_requested = true`),
      withdrawn: await row(`withdrawn_at = now()`),
      missing: randomUUID(),
    };
    const dueAt = new Date(Date.now() - 1_000);
    const claims = await repo.claimMany(
      Object.values(rows).map((id) => ({ id, dueAt })),
      STALE_MS,
    );
    expect(Object.fromEntries(Object.keys(rows).map((k, i) => [k, claims[i]?.kind]))).toEqual({
      pending: 'claimed',
      sent: 'done',
      busy: 'busy',
      stale: 'claimed',
      failed: 'failed',
      redriven: 'claimed',
      withdrawn: 'withdrawn',
      missing: 'missing',
    });
    const claimed = await tdb.db.notification.findMany({ where: { id: { in: [rows.pending, rows.stale, rows.redriven] } } });
    for (const n of claimed) expect(n).toMatchObject({ status: 'SENDING', sendingDueAt: dueAt, redriveRequested: false });
    // A claim already made is not made twice: the next statement finds them busy.
    expect((await repo.claimMany([{ id: rows.pending, dueAt }], STALE_MS))[0]?.kind).toBe('busy');
    await expect(
      repo.claimMany(
        [
          { id: rows.pending, dueAt },
          { id: rows.pending.toUpperCase(), dueAt },
        ],
        STALE_MS,
      ),
    ).rejects.toThrow(/distinct/);
    // An id in upper case is the same row, answered as such.
    const upper = await row('');
    expect((await repo.claimMany([{ id: upper.toUpperCase(), dueAt }], STALE_MS))[0]?.kind).toBe('claimed');
  });

  it('lets the SENT mark the database refuses for one row fail alone, the rows beside it marked', async () => {
    const repo = createDeliveries(tdb.db);
    const ids = await Promise.all(Array.from({ length: 5 }, () => row(`status = 'SENDING', sending_at = now()`)));
    const broken = ids[2] as string;
    const fault = await failNotificationWrites(tdb.db, { write: 'sent', of: { id: broken } });
    try {
      const marks = gatherOrEach<string, boolean>(repo.markSentMany, repo.markSent, { maxBatch: 100, whole: isDatabaseUnavailable });
      const results = await Promise.allSettled(ids.map((id) => marks.submit(id)));
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      // The shared statement failed once (all rolled back), then the broken row alone.
      expect(await fault.failures()).toBe(2);
    } finally {
      await fault.heal();
    }
    const rows = await tdb.db.notification.findMany({ where: { id: { in: ids } }, select: { id: true, status: true, attempts: true } });
    for (const r of rows) expect(r).toMatchObject(r.id === broken ? { status: 'SENDING', attempts: 0 } : { status: 'SENT', attempts: 1 });
  });
});
