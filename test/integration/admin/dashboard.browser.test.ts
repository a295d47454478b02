// The dashboard in a real headless Chromium (Debian's, driven by
// playwright-core): it asks for the token and keeps it for the tab only, shows
// the queue numbers the API reports, charts lateness, lists recent batches,
// and its redrive button sends a dead job back to work. Also: /docs renders.
// Screenshots go to test-artifacts/. Without Chromium this test fails; it is
// never skipped.
import { existsSync, mkdirSync } from 'node:fs';
import { type Browser, type Page, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { dropPrefix, redisClient, waitFor } from '../../helpers/redis.js';
import { startTestService, type TestService } from '../../helpers/service.js';
import { orderBody } from '../../helpers/bodies.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = new URL('../../../test-artifacts/', import.meta.url);
const TOKEN = 'dashboard-admin-token-0123456789';
// Without the background-networking flags Chromium dials out at start, and this network refuses it.
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let tdb: TestDb;
let hook: Webhook;
let svc: TestService;
let browser: Browser;
const pageErrors: string[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install -y chromium; .ci/run does) or set CHROMIUM_PATH`);
  }
  mkdirSync(ARTIFACTS, { recursive: true });
  tdb = await createTestDb('dashboard');
  hook = await startWebhook(() => 'fail');
  svc = await startTestService(tdb.url, {
    ADMIN_TOKEN: TOKEN,
    NOTIFY_WEBHOOK_URL: hook.url,
    NOTIFY_MAX_ATTEMPTS: '1',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    ORDER_RECONCILE_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
    PARCEL_RECONCILE_INTERVAL_SECONDS: '3600',
    PARCEL_BATCH_SIZE: '2',
  });
  // playwright-core launches with a fresh temporary profile (--user-data-dir) of its own.
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
});
afterAll(async () => {
  await browser?.close();
  await svc?.stop();
  await hook?.close();
  if (svc) {
    const redis = redisClient('dashboard-test');
    await dropPrefix(redis, svc.prefix);
    redis.disconnect();
  }
  await tdb?.drop();
});

const admin = (path: string) => svc.api().get(path).set('Authorization', `Bearer ${TOKEN}`);

/** An order left unpaid: its cancellation notice fails at the webhook and, with one attempt allowed, dies. */
async function deadNotification(): Promise<{ orderId: string; jobId: string }> {
  const order = await svc
    .api()
    .post('/orders')
    .send(orderBody({ customerId: 'dash', paymentTimeoutSeconds: 1 }));
  expect(order.status).toBe(201);
  let jobId = '';
  const died = await waitFor(
    async () => {
      const page = await admin('/admin/queues/notifications/dead?limit=50');
      const job = (page.body.jobs as { id: string; payload: { notificationId?: string } }[]).find((j) => j.id.startsWith('notification:'));
      jobId = job?.id ?? '';
      return jobId !== '';
    },
    15_000,
    100,
  );
  expect(died).toBe(true);
  return { orderId: order.body.id as string, jobId };
}

async function openDashboard(page: Page): Promise<void> {
  await page.goto(`${svc.url}/admin/dashboard`);
  await page.locator('#token').fill(TOKEN);
  await page.locator('#login button[type=submit]').click();
  await page.locator('#board').waitFor({ state: 'visible' });
  await page.locator('#login').waitFor({ state: 'hidden' });
}

// Runs in the page; the test's TypeScript has no DOM types, so the elements are described by what is read.
type Cell = { dataset: Record<string, string | undefined>; textContent: string | null };
type Row = Cell & { querySelectorAll(s: string): Iterable<Cell> };

/** The page's queue table as numbers, queue -> field -> value. */
function pageNumbers(page: Page): Promise<Record<string, Record<string, number>>> {
  return page.$$eval('#queues tbody tr', (rows) =>
    Object.fromEntries(
      (rows as unknown as Row[]).map((r) => [
        r.dataset.queue ?? '',
        Object.fromEntries([...r.querySelectorAll('td[data-field]')].map((c) => [c.dataset.field ?? '', Number(c.textContent)])),
      ]),
    ),
  );
}

async function apiNumbers(): Promise<Record<string, Record<string, number>>> {
  const res = await admin('/admin/queues');
  const out: Record<string, Record<string, number>> = {};
  for (const { total: t } of res.body.queues) out[t.queue] = { pending: t.pending, dueNow: t.dueNow, inFlight: t.inFlight, dead: t.dead };
  return out;
}

describe('dashboard', () => {
  it('shows what the API reports and redrives a dead job with a click', async () => {
    const { orderId, jobId } = await deadNotification();
    await svc.api().put('/areas/DASH-1').send({ vehiclePlate: 'DB-42', sorterContact: 'sorter@example.com' });
    await svc.api().post('/parcels').send({ trackingNo: 'DASH-P1', area: 'DASH-1' });
    const full = await svc.api().post('/parcels').send({ trackingNo: 'DASH-P2', area: 'DASH-1' });
    expect(full.body.status).toBe('BATCHED');

    const context = await browser.newContext({ viewport: { width: 1200, height: 1000 } });
    const page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
    // With a valid token nothing should fail: no refused request, no script or style the page's CSP blocks.
    page.on('console', (m) => m.type() === 'error' && pageErrors.push(m.text()));
    await openDashboard(page);

    // The numbers may move between two reads (periodic jobs): equal at some refresh is the claim.
    let last: unknown;
    const same = await waitFor(
      async () => {
        const [api, shown] = await Promise.all([apiNumbers(), pageNumbers(page)]);
        last = { api, shown };
        const fields = ['pending', 'dueNow', 'inFlight', 'dead'];
        const queues = Object.keys(api).sort();
        return (
          queues.length === 6 && queues.join() === Object.keys(shown).sort().join() && queues.every((q) => fields.every((f) => api[q]?.[f] === shown[q]?.[f]))
        );
      },
      15_000,
      250,
    );
    expect(same, JSON.stringify(last)).toBe(true);
    // The order's cancellation notice and the batch's dispatch notice both failed at the webhook.
    expect((await pageNumbers(page)).notifications?.dead).toBe(2);

    await page.locator(`#batches tr[data-batch-id="${full.body.batchId}"]`).waitFor();
    await expect.poll(() => page.locator('#batches tbody tr').first().textContent(), { timeout: 10_000 }).toContain('DB-42');
    // The orders expiry and the failed delivery ran in the workers: their lateness is charted. (Attached,
    // not visible: on a busy machine their seconds may be apart, lone points drawn as dots, not lines.)
    await page.locator('#lateness path[data-queue="orders"]').waitFor({ state: 'attached', timeout: 10_000 });
    await page.locator('#lateness path[data-queue="notifications"]').waitFor({ state: 'attached', timeout: 10_000 });

    const row = page.locator(`#dead tr[data-job-id="${jobId}"]`);
    await row.waitFor();
    await expect.poll(() => row.textContent()).toContain('HTTP 503');
    await page.screenshot({ path: new URL('dashboard-dead.png', ARTIFACTS).pathname, fullPage: true });

    hook.setBehaviour(() => 'ok');
    await row.locator('button[data-action="redrive"]').click();
    // Out of the dead set, delivered, acked: the job is gone and the notification SENT.
    expect(await waitFor(async () => (await admin(`/admin/queues/notifications/jobs/${encodeURIComponent(jobId)}`)).status === 404, 10_000, 100)).toBe(true);
    const sent = await svc.api().get(`/notifications?orderId=${orderId}`);
    expect(sent.body.notifications).toMatchObject([{ kind: 'ORDER_CANCELLED', status: 'SENT' }]);
    await row.waitFor({ state: 'detached', timeout: 10_000 });
    await expect.poll(async () => (await pageNumbers(page)).notifications?.dead, { timeout: 10_000 }).toBe(1);
    await page.screenshot({ path: new URL('dashboard.png', ARTIFACTS).pathname, fullPage: true });
    expect(pageErrors).toEqual([]);
    await context.close();
  });

  it('keeps the token for the tab only and asks again after a refused one', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await openDashboard(page);
    type Storage = { getItem(k: string): string | null; length: number };
    const stored = await page.evaluate(() => {
      const g = globalThis as unknown as { sessionStorage: Storage; localStorage: Storage };
      return { session: g.sessionStorage.getItem('ots-admin-token'), local: g.localStorage.length };
    });
    expect(stored).toEqual({ session: TOKEN, local: 0 });
    await page.reload();
    await page.locator('#board').waitFor({ state: 'visible' }); // same tab: still signed in

    const other = await context.newPage(); // a new tab starts without it
    await other.goto(`${svc.url}/admin/dashboard`);
    await other.locator('#login').waitFor({ state: 'visible' });
    await other.locator('#token').fill('x'.repeat(20));
    await other.locator('#login button[type=submit]').click();
    await other.locator('#login-error').waitFor({ state: 'visible' });
    expect(await other.locator('#login-error').textContent()).toMatch(/refused/);
    expect(await other.locator('#board').isHidden()).toBe(true);
    await context.close();
  });
});

describe('API docs page', () => {
  it('renders every operation with Swagger UI from the service itself', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const outside: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(svc.url)) outside.push(r.url());
    });
    await page.goto(`${svc.url}/docs`);
    const documented = Object.values((await svc.api().get('/openapi.json')).body.paths as Record<string, object>).reduce<number>(
      (n, ops) => n + Object.keys(ops).length,
      0,
    );
    await expect.poll(() => page.locator('.opblock').count(), { timeout: 15_000 }).toBe(documented);
    await page.screenshot({ path: new URL('docs.png', ARTIFACTS).pathname });
    expect(outside.filter((u) => !u.startsWith('data:'))).toEqual([]);
    await context.close();
  });
});
