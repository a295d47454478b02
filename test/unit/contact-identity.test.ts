// The per-contact reminder limit counts who a contact reaches, not how it was
// spelled (review of 2026-11-25: five spellings of one number each had a
// fresh allowance).
import { describe, expect, it } from 'vitest';
import { contactIdentity } from '../../src/modules/appointments/appointments.service.js';

describe('contactIdentity', () => {
  it('reads every spelling of one phone number as its digits', () => {
    const spellings = [
      '+15550100003',
      '+1 555 010 0003',
      '+1-555-010-0003',
      '+1 (555) 010-0003',
      '0015550100003',
      '+15550100003\u200b',
      '＋１５５５０１００００３',
    ];
    expect(new Set(spellings.map((c) => contactIdentity('sms', c)))).toEqual(new Set(['sms:15550100003']));
    expect(contactIdentity('sms', '+15550100004')).not.toBe(contactIdentity('sms', '+15550100003'));
  });

  it('reads every spelling of one mailbox as one', () => {
    const spellings = [
      'ann@example.com',
      'Ann@Example.COM',
      'ann+promo@example.com',
      'ann@example.com.',
      ' ann@example.com',
      'a\u200bnn@example.com',
      'ａｎｎ@example.com',
    ];
    expect(new Set(spellings.map((c) => contactIdentity('email', c)))).toEqual(new Set(['email:ann@example.com']));
    expect(contactIdentity('email', 'bob@example.com')).not.toBe(contactIdentity('email', 'ann@example.com'));
    expect(contactIdentity('email', 'ann@example.org')).not.toBe(contactIdentity('email', 'ann@example.com'));
  });
});
