// Concurrent changes of one timer on the real service: the job ends at the
// row's time whatever order two changes schedule in; one timer per key.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
let target: { type: 'webhook'; url: string };

beforeAll(async () => {
  tdb = await createTestDb('timers_races');
  hook = await startWebhook();
  target = { type: 'webhook', url: `${hook.url}/timers` };
  svc = await startTestService(tdb.url, {
    TIMER_WEBHOOK_HOSTS: `127.0.0.1:${new URL(hook.url).port}`,
    TIMER_WEBHOOK_RETRY_DELAYS_MS: '100',
    NOTIFY_RETRY_JITTER: '0',
    TIMER_RELAY_INTERVAL_SECONDS: '1',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const rowOf = async (key: string) =>
  (
    await tdb.db.$queryRaw<{ id: string; due: Date; status: string }[]>`
      SELECT n.id::text AS id, n.due_at AS due, n.status::text AS status FROM timers t JOIN notifications n ON n.id = t.notification_id
       WHERE t.client = 'default' AND t.key = ${key}`
  )[0];
const jobOf = (rowId: string) => svc.module('timers').queue.get(`notification:${rowId}:deliver`);
const callsOf = (key: string) => hook.calls.filter((c) => (c.body as unknown as { key: string }).key === key);

describe('a batch and a PUT of one key', () => {
  it("a batch and a later PUT of one key: the job ends at the row's time, delivered then", async () => {
    // 400 existing timers make the batch's change loop (one transaction per item) take a while.
    const others = Array.from({ length: 400 }, (_, i) => ({ key: `o${i}`, delayMs: 3_600_000, target }));
    expect((await svc.api().post('/timers/batch').send({ timers: others })).status).toBe(200);
    expect((await svc.api().put('/timers/k').send({ delayMs: 3_600_000, target })).status).toBe(201);
    const created = await rowOf('k');

    // Batch A: k first (to 10 minutes), then the 400 others.
    const batch = svc
      .api()
      .post('/timers/batch')
      .send({ timers: [{ key: 'k', delayMs: 600_000, target, payload: 'A' }, ...others.map((o) => ({ ...o, delayMs: 3_500_000 }))] })
      .then((r) => r);
    // Once A's change of k committed (its due moved), PUT B moves k to 1 s from now.
    expect(await waitFor(async () => (await rowOf('k'))?.due.getTime() !== created?.due.getTime(), 10_000, 5)).toBe(true);
    const b = await svc.api().put('/timers/k').send({ delayMs: 8_000, target, payload: 'B' });
    expect(b.status).toBe(200);
    const a = await batch;
    expect(a.status).toBe(200);

    const row = await rowOf('k');
    const job = await jobOf(row?.id as string);
    // Past B's fire time plus a few relay passes: B's timer should have fired.
    await sleep(Math.max(0, Date.parse(b.body.fireAt) - Date.now()) + 3_000);
    const got = await svc.api().get('/timers/k');
    expect(job?.dueAt).toBe(row?.due.getTime());
    expect(got.body.state).toBe('DELIVERED');
    expect(callsOf('k')).toHaveLength(1);
  });
});

describe('two PUTs of a new key at once', () => {
  for (const mode of ['replace', 'keep', 'debounce'] as const) {
    it(`${mode}: one timer, one firing, one job, answers 201 and 200`, async () => {
      const key = `twin-${mode}`;
      const body = (n: number) => ({ delayMs: 60_000 + n, target, mode, payload: n });
      const rs = await Promise.all([1, 2, 3, 4].map((n) => svc.api().put(`/timers/${key}`).send(body(n))));
      const statuses = rs.map((r) => r.status).sort();
      const firings = await tdb.db.$queryRaw<
        { n: bigint }[]
      >`SELECT count(*) AS n FROM notifications n JOIN timers t ON t.id = n.timer_id WHERE t.key = ${key}`;
      const row = await rowOf(key);
      const job = await jobOf(row?.id as string);
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(firings[0]?.n).toBe(1n);
      expect(job?.dueAt).toBe(row?.due.getTime());
    });
  }

  it('two batches creating the same 200 keys at once: one timer each, each key 201 once and 200 once', async () => {
    const timers = Array.from({ length: 200 }, (_, i) => ({ key: `cb${i}`, delayMs: 60_000, target }));
    const [x, y] = await Promise.all([svc.api().post('/timers/batch').send({ timers }), svc.api().post('/timers/batch').send({ timers })]);
    expect([x.status, y.status]).toEqual([200, 200]);
    for (let i = 0; i < 200; i++) {
      const s = [x.body.results[i].status, y.body.results[i].status].sort();
      expect(s).toEqual([200, 201]);
    }
    const n = await tdb.db.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM timers WHERE key LIKE 'cb%'`;
    expect(n[0]?.n).toBe(200n);
  });

  it('PUT racing DELETE: the final state agrees with the answers', async () => {
    for (let i = 0; i < 20; i++) {
      const key = `pd${i}`;
      await svc.api().put(`/timers/${key}`).send({ delayMs: 60_000, target });
      const [p, d] = await Promise.all([svc.api().put(`/timers/${key}`).send({ delayMs: 50_000, target }), svc.api().delete(`/timers/${key}`)]);
      const got = await svc.api().get(`/timers/${key}`);
      // Either the PUT moved it then the DELETE cancelled it (200, 200, CANCELLED),
      // or the DELETE cancelled it then the PUT made a new firing (201, 200, PENDING).
      const ok = (p.status === 200 && got.body.state === 'CANCELLED') || (p.status === 201 && got.body.state === 'PENDING');
      expect(d.status).toBe(200);
      expect(ok, `${i}: PUT ${p.status}, DELETE ${d.status}, then ${got.body.state}`).toBe(true);
    }
  });
});

describe('a move and a claim', () => {
  it('a move that meets a claim committed after its read answers 409, and the claimed firing keeps its time', async () => {
    expect((await svc.api().put('/timers/mc1').send({ delayMs: 600_000, target })).status).toBe(201);
    const before = await rowOf('mc1');
    // A claim stands in: the row locked, then made SENDING, while the PUT's move waits for it.
    const claim = new pg.Client({ connectionString: tdb.url });
    await claim.connect();
    try {
      await claim.query('BEGIN');
      await claim.query('SELECT 1 FROM notifications WHERE id = $1::uuid FOR UPDATE', [before?.id]);
      const put = svc
        .api()
        .put('/timers/mc1')
        .send({ delayMs: 900_000, target })
        .then((r) => r);
      const waiting = async () =>
        (
          await tdb.db.$queryRaw<{ n: bigint }[]>`
            SELECT count(*) AS n FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%UPDATE notifications SET due_at%'`
        )[0]?.n === 1n;
      expect(await waitFor(waiting, 10_000, 20)).toBe(true);
      await claim.query(`UPDATE notifications SET status = 'SENDING', sending_at = now() WHERE id = $1::uuid`, [before?.id]);
      await claim.query('COMMIT');
      const r = await put;
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 409, code: 'TIMER_DELIVERING' });
      const after = await rowOf('mc1');
      expect({ status: after?.status, due: after?.due.getTime() }).toEqual({ status: 'SENDING', due: before?.due.getTime() });
    } finally {
      await claim.end();
    }
  });
});
