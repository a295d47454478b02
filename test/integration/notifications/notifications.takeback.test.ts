// A reminder taken back (its slot held again) whose fresh delivery job was
// never scheduled (a crash right after the write, a Redis blip) is still
// delivered: the fresh dispatch is not best effort, so the reminder job runs
// again and dispatches afresh, replacing the dead job of its earlier delivery
// (found when turning the delivery review into regression tests, 2026-11-23).
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ServiceModule } from '../../../src/core/module.js';
import { DEFAULT_CLIENT } from '../../../src/core/auth/api-key-input.js';
import { REMIND_JOB } from '../../../src/modules/appointments/appointments.job-ids.js';
import { createAppointmentsRepository } from '../../../src/modules/appointments/appointments.repository.js';
import { deliverJobId } from '../../../src/modules/notifications/notifications.jobs.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;

beforeAll(async () => {
  tdb = await createTestDb('takeback_lost');
  hook = await startWebhook();
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: hook.url,
    NOTIFY_RETRY_DELAYS_MS: '200',
    NOTIFY_RETRY_JITTER: '0',
    NOTIFY_MAX_ATTEMPTS: '1',
    NOTIFY_TIMEOUT_MS: '500',
    WORKER_LEASE_MS: '1000',
    WORKER_IDLE_RECHECK_MS: '200',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_GRACE_SECONDS: '0',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const mod = (name: string) => svc.module(name) as ServiceModule;
const row = (id: string) => tdb.db.notification.findUniqueOrThrow({ where: { id } });
const slot = (minutes: number) => new Date(Math.ceil(Date.now() / 60_000) * 60_000 + minutes * 60_000).toISOString();

it('a reminder taken back whose fresh dispatch was lost is still delivered', async () => {
  hook.setBehaviour(() => 'fail');
  const a = slot(120);
  const b = slot(180);
  const res = await svc
    .api()
    .post('/appointments')
    .send({ customerId: 'tb', contact: 'tb@example.com', channel: 'email', startsAt: a, remindBeforeSeconds: 86_400 });
  const id = res.body.id as string;
  let n = '';
  await waitFor(async () => {
    n = (await tdb.db.notification.findFirst({ where: { appointmentId: id } }))?.id ?? '';
    return n !== '';
  }, 5_000);
  const q = mod('notifications').queue;
  expect(await waitFor(async () => (await q.get(deliverJobId(n)))?.state === 'dead', 5_000, 20)).toBe(true);
  // The service's own remind jobs held back: the steps below play the one that dies.
  const appointmentsQueue = mod('appointments').queue;
  await appointmentsQueue.pause(REMIND_JOB);
  try {
    expect((await svc.api().patch(`/appointments/${id}`).send({ startsAt: b })).status).toBe(200);
    expect((await row(n)).status).toBe('CANCELLED');
    hook.setBehaviour(() => 'ok');
    // The move back commits and its remind job writes the reminder back, then
    // the worker dies before the dispatch (DB steps only, as that job would run them).
    const repo = createAppointmentsRepository(tdb.db);
    await repo.reschedule(DEFAULT_CLIENT, id, new Date(a), null);
    expect(await repo.writeReminder(id, Date.parse(a))).toEqual({ id: n, fresh: true });
    // The remind job comes back (its lease ran out) and does what it does on a redelivery.
    const appts = mod('appointments') as ServiceModule & { service: { remind(id: string, ms: number): Promise<{ kind: string }> } };
    expect((await appts.service.remind(id, Date.parse(a))).kind).toBe('already_written');
  } finally {
    await appointmentsQueue.resume(REMIND_JOB);
  }
  const delivered = await waitFor(async () => (await row(n)).status === 'SENT', 3_000, 20);
  console.log('after the redelivered remind job:', (await row(n)).status, 'delivery job:', (await q.get(deliverJobId(n)))?.state);
  // The relay, its safety net, later.
  await tdb.db.$executeRawUnsafe(`UPDATE notifications SET created_at = now() - interval '1 minute' WHERE id = $1::uuid`, n);
  await mod('notifications')
    .periodic.find((p) => p.id === 'notifications:relay')!
    .run({ occurrence: Date.now(), signal: new AbortController().signal });
  const r = await row(n);
  console.log('after the relay:', r.status, r.attempts, r.lastError, 'calls', hook.calls.filter((c) => c.body.id === n).length);
  expect(delivered).toBe(true);
});
