// Signed webhooks (Standard Webhooks), checked by the `standardwebhooks`
// package a receiver would use, not by our own code: every call carries
// webhook-id (the notification id, the same on a retry), webhook-timestamp
// and a v1 signature per configured secret (a rotation); each kind of
// notification goes to its own endpoint with its own secret, the others to
// NOTIFY_WEBHOOK_URL.
import { randomBytes } from 'node:crypto';
import { Webhook as Verifier } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/config.js';
import { appointmentBody, orderBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { type Received, startWebhook, type Webhook } from '../../helpers/webhook.js';

const secret = () => `whsec_${randomBytes(24).toString('base64')}`;
const SHOP_OLD = secret();
const SHOP_NEW = secret();
const GATEWAY = secret();

let tdb: TestDb;
let svc: TestService;
let shop: Webhook;
let gateway: Webhook;

beforeAll(async () => {
  tdb = await createTestDb('signed');
  shop = await startWebhook();
  gateway = await startWebhook();
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: shop.url,
    NOTIFY_WEBHOOK_SECRET: `${SHOP_OLD}, ${SHOP_NEW}`,
    NOTIFY_REMINDERS_WEBHOOK_URL: gateway.url,
    NOTIFY_REMINDERS_WEBHOOK_SECRET: GATEWAY,
    NOTIFY_RETRY_DELAYS_MS: '100',
    NOTIFY_RETRY_JITTER: '0',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await shop?.close();
  await gateway?.close();
});

const verifies = (key: string, call: Received): boolean => {
  try {
    new Verifier(key).verify(call.raw, call.headers);
    return true;
  } catch {
    return false;
  }
};

describe('signed webhooks', () => {
  it('signs an order notice with both secrets of a rotation, with the same webhook-id on its retry', async () => {
    shop.setBehaviour((call) => (call === 1 ? 'fail' : 'ok'));
    const created = await svc
      .api()
      .post('/orders')
      .send(orderBody({ customerId: 'signed' }));
    expect(created.status).toBe(201);
    expect((await svc.api().post(`/orders/${created.body.id}/cancel`)).status).toBe(200);
    await waitFor(async () => shop.delivered.length === 1, 5_000, 20);
    const calls = shop.calls;
    expect(calls).toHaveLength(2);
    const notification = await tdb.db.notification.findFirstOrThrow({ where: { orderId: created.body.id } });
    for (const call of calls) {
      expect(call.body).toMatchObject({ id: notification.id, kind: 'ORDER_CANCELLED' });
      expect(call.headers['webhook-id']).toBe(notification.id);
      expect(Math.abs(Number(call.headers['webhook-timestamp']) * 1_000 - call.at)).toBeLessThan(5_000);
      expect(call.headers['webhook-signature']?.split(' ')).toHaveLength(2);
      expect(verifies(SHOP_OLD, call)).toBe(true);
      expect(verifies(SHOP_NEW, call)).toBe(true);
      expect(verifies(GATEWAY, call)).toBe(false);
    }
    // A body changed on the way no longer verifies.
    expect(verifies(SHOP_NEW, { ...calls[1]!, raw: calls[1]!.raw.replace('ORDER_CANCELLED', 'ORDER_PAID') })).toBe(false);
    expect(gateway.calls).toHaveLength(0);
  });

  it("sends a reminder to the reminders' endpoint, signed with its own secret", async () => {
    const booked = await svc
      .api()
      .post('/appointments')
      .send(appointmentBody({ customerId: 'signed' }));
    expect(booked.status).toBe(201);
    await waitFor(async () => gateway.delivered.length === 1, 5_000, 20);
    const call = gateway.delivered[0]!;
    expect(call.body.kind).toBe('APPOINTMENT_REMINDER');
    expect(verifies(GATEWAY, call)).toBe(true);
    expect(verifies(SHOP_OLD, call)).toBe(false);
    expect(shop.calls.filter((c) => c.body.kind === 'APPOINTMENT_REMINDER')).toHaveLength(0);
  });
});

describe('webhook secrets in the configuration', () => {
  const base = { NOTIFY_WEBHOOK_URL: 'http://127.0.0.1:1/hook' };

  it('refuses a malformed secret without echoing it', () => {
    const bad = 'whsec_not base64 at all!';
    for (const value of [bad, 'plain-secret-without-prefix', `whsec_${Buffer.from('short').toString('base64')}`]) {
      let err: unknown;
      try {
        loadConfig({ ...base, NOTIFY_WEBHOOK_SECRET: value });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect(String(err)).toContain('NOTIFY_WEBHOOK_SECRET');
      expect(String(err)).not.toContain('not base64 at all');
      expect(String(err)).not.toContain('plain-secret');
    }
  });

  it('refuses a secret without its endpoint', () => {
    expect(() => loadConfig({ NOTIFY_BATCHES_WEBHOOK_SECRET: secret() })).toThrow(/NOTIFY_BATCHES_WEBHOOK_SECRET: is set without NOTIFY_BATCHES_WEBHOOK_URL/);
  });

  it('hides secrets and URL passwords in any configuration error', () => {
    let err: unknown;
    try {
      loadConfig({ ADMIN_TOKEN: 'too-short-token', DATABASE_URL: 'mysql://app:hunter2@db/x' });
    } catch (e) {
      err = e;
    }
    expect(String(err)).toMatch(/ADMIN_TOKEN: .*got a value, hidden/);
    expect(String(err)).toContain('DATABASE_URL: must be a postgres:// URL (got "mysql://app:***@db/x")');
    expect(String(err)).not.toContain('too-short-token');
    expect(String(err)).not.toContain('hunter2');
  });
});
