// Contacts through the API: a contact is one phone number or one mailbox,
// stored as its channel reaches it, and the per-contact limit counts the
// person, so respelled numbers and mailboxes share one allowance. Bad
// contacts and bad free text are refused with nothing written.
import type { Test } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appointmentBody, areaBody, orderBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const PER_HOUR = 3;

let tdb: TestDb;
let svc: TestService;

beforeAll(async () => {
  tdb = await createTestDb('appts_contacts');
  svc = await startTestService(tdb.url, { REMINDERS_PER_CONTACT_PER_HOUR: String(PER_HOUR), PHONE_DEFAULT_REGION: 'GB' }, 'api');
});
afterAll(() => stopTestService(svc, tdb));

// Two days ahead with a minute's lead: no reminder falls due while the file runs.
const book = (channel: 'sms' | 'email', contact: string) =>
  svc
    .api()
    .post('/appointments')
    .send(appointmentBody({ channel, contact, startsAt: new Date(Date.now() + 2 * 86_400_000).toISOString(), remindBeforeSeconds: 60 }));
const written = async () => ({
  appointments: await tdb.db.appointment.count(),
  notifications: await tdb.db.notification.count(),
  orders: await tdb.db.order.count(),
  areas: await tdb.db.area.count(),
});

describe('respelled contacts share one allowance', () => {
  it('every spelling of one phone number is stored in E.164 and counted as one', async () => {
    const spellings = ['+44 7911 123456', '07911 123456', '+44 (0) 7911 123456'];
    for (const s of spellings) {
      const res = await book('sms', s);
      expect(res.status, s).toBe(201);
      expect(res.body.contact).toBe('+447911123456');
    }
    const before = await written();
    const again = await book('sms', '+447911123456');
    expect(again.status).toBe(429);
    expect(again.body.code).toBe('CONTACT_RATE_LIMITED');
    expect(await written()).toEqual(before);
    // Another number keeps its own allowance.
    expect((await book('sms', '+44 7911 123457')).status).toBe(201);
  });

  it('every spelling of one Gmail mailbox is counted as one, dots and googlemail.com included', async () => {
    for (const s of ['victim@gmail.com', 'vic.tim@gmail.com', 'victim@googlemail.com']) {
      const res = await book('email', s);
      expect(res.status, s).toBe(201);
      expect(res.body.contact).toBe(s);
    }
    const before = await written();
    const again = await book('email', 'Victim+promo@Gmail.com');
    expect(again.status).toBe(429);
    expect(again.body.code).toBe('CONTACT_RATE_LIMITED');
    expect(await written()).toEqual(before);
  });
});

describe('bad contacts: 422 INVALID_CONTACT naming the field, nothing written', () => {
  const cases: [string, 'sms' | 'email', string][] = [
    ['a list of two numbers', 'sms', '+44 7911 123458, +44 7911 123459'],
    ['a sentence as a number', 'sms', 'hello world, this is not a phone'],
    ['a mailbox as a number', 'sms', 'ann@example.com'],
    ['a fictional number', 'sms', '+44 7700 900123'],
    ['a quoted local part', 'email', '"victim"@gmail.com'],
    ['a list of two mailboxes', 'email', 'victim@gmail.com, other@example.test'],
    ['a display name', 'email', 'Victim <victim@example.com>'],
    ['markup', 'email', '<script>x</script>'],
    ['a number as a mailbox', 'email', '+447911123456'],
  ];
  it.each(cases)('%s', async (_name, channel, contact) => {
    const before = await written();
    const res = await book(channel, contact);
    expect(res.status).toBe(422);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ code: 'INVALID_CONTACT', errors: [{ path: 'contact' }] });
    expect(await written()).toEqual(before);
  });
});

describe('bad free text: 400 VALIDATION_FAILED naming the field, nothing written', () => {
  const api = () => svc.api();
  const cases: [string, () => Test, string][] = [
    [
      'bidi and C1 controls in a customerId',
      () =>
        api()
          .post('/appointments')
          .send(appointmentBody({ customerId: 'ab\u202Egnp.exe\u0085\u009B31m\u200B' })),
      'customerId',
    ],
    [
      'a lone surrogate in a customerId',
      () =>
        api()
          .post('/appointments')
          .send(appointmentBody({ customerId: 'a\ud800b' })),
      'customerId',
    ],
    [
      'a zero-width space in a contact',
      () =>
        api()
          .post('/appointments')
          .send(appointmentBody({ contact: 'a\u200bnn@example.com' })),
      'contact',
    ],
    [
      'a bidi isolate in an order customerId',
      () =>
        api()
          .post('/orders')
          .send(orderBody({ customerId: 'a\u2066b' })),
      'customerId',
    ],
    [
      'a C1 control in an sku',
      () =>
        api()
          .post('/orders')
          .send(orderBody({ items: [{ sku: 'S\u009b1', quantity: 1, unitPriceCents: 100 }] })),
      'items.0.sku',
    ],
    [
      'a right-to-left override in a vehicle plate',
      () =>
        api()
          .put('/areas/bidi')
          .send(areaBody({ vehiclePlate: 'AB\u202E321' })),
      'vehiclePlate',
    ],
  ];
  it.each(cases)('%s', async (_name, send, field) => {
    const before = await written();
    const res = await send();
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect(res.body.errors.map((e: { path: string }) => e.path)).toContain(field);
    expect(await written()).toEqual(before);
  });

  it('still takes letters of other scripts: a Shanghai plate, a customer in Cyrillic', async () => {
    const area = await api()
      .put('/areas/hu')
      .send(areaBody({ vehiclePlate: '沪A12345' }));
    expect(area.status).toBe(200);
    expect(area.body.vehiclePlate).toBe('沪A12345');
    const order = await api()
      .post('/orders')
      .send(orderBody({ customerId: 'Ольга Zoë' }));
    expect(order.status).toBe(201);
    expect(order.body.customerId).toBe('Ольга Zoë');
  });
});
