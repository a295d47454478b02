// What an appointment's contact may be, and who it reaches: the per-contact
// reminder limit counts the person, not the spelling (review of 2026-11-26,
// S5: respelled numbers and mailboxes each had a fresh allowance, and a list
// of two, a sentence or markup passed as a contact).
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/core/errors.js';
import { checkedContact, contactIdentity, mailboxOf, phoneNumberOf } from '../../src/core/contact.js';

describe('phoneNumberOf', () => {
  it('reads every spelling of one number as its E.164 form', () => {
    const spellings = ['+447911123456', '+44 7911 123456', '+44 (0) 7911 123456', '+44-7911-123-456'];
    expect(new Set(spellings.map((s) => phoneNumberOf(s)))).toEqual(new Set(['+447911123456']));
    expect(phoneNumberOf('+1 (202) 555-0123')).toBe('+12025550123');
    expect(phoneNumberOf('+8613800000000')).toBe('+8613800000000');
  });

  it('takes a national number only with a default region', () => {
    expect(phoneNumberOf('07911 123456')).toBeNull();
    expect(phoneNumberOf('07911 123456', 'GB')).toBe('+447911123456');
    expect(phoneNumberOf('+44 (0) 7911 123456', 'GB')).toBe('+447911123456');
    // An international number stays itself whatever the region.
    expect(phoneNumberOf('+1 202 555 0123', 'GB')).toBe('+12025550123');
  });

  it("refuses the review's fictional number in every spelling: 07700 900xxx is reserved for drama, no phone has it", () => {
    for (const [s, region] of [['+44 7700 900123'], ['07700 900123', 'GB'], ['+44 (0) 7700 900123']] as const) {
      expect(phoneNumberOf(s, region), s).toBeNull();
    }
  });

  it('refuses what is not one number', () => {
    for (const s of [
      '+44 7911 123456, +44 7911 123457',
      '+44 7911 123456 +44 7911 123457',
      'hello world, this is not a phone',
      'call +44 7911 123456',
      'tel:+447911123456',
      '+44 7911 123456 ext. 5',
      '+44 7911 12345',
      '+44 7911 1234567',
      '+999 123 456 789',
      '<script>x</script>',
    ]) {
      expect(phoneNumberOf(s), s).toBeNull();
      expect(phoneNumberOf(s, 'GB'), `${s} (GB)`).toBeNull();
    }
  });
});

describe('mailboxOf', () => {
  it('takes one addr-spec as given', () => {
    for (const s of ['ann@example.com', 'Ann.Lee+promo@Example.COM', "o'brien@mail.example.ie", 'a_b-c@sub-domain.example.org'])
      expect(mailboxOf(s), s).toBe(s);
  });

  it('refuses lists, display names, quotes, comments and markup', () => {
    for (const s of [
      '"victim"@gmail.com',
      'victim@gmail.com, other@example.test',
      'victim@gmail.com,other@example.test',
      'victim@gmail.com other@example.test',
      'Victim <victim@gmail.com>',
      '<victim@gmail.com>',
      'victim@gmail.com (Victim)',
      'victim(x)@gmail.com',
      '<script>x</script>',
      'victim@[127.0.0.1]',
      ' victim@gmail.com',
      'victim@gmail.com.',
      'vic..tim@gmail.com',
      '.victim@gmail.com',
      'victim@gmail',
      'victim@@gmail.com',
      'a@b@gmail.com',
      'victim',
    ]) {
      expect(mailboxOf(s), s).toBeNull();
    }
  });

  it("keeps RFC 5321's lengths", () => {
    expect(mailboxOf(`${'a'.repeat(64)}@example.com`)).not.toBeNull();
    expect(mailboxOf(`${'a'.repeat(65)}@example.com`)).toBeNull();
    expect(mailboxOf(`ann@${'d'.repeat(63)}.example`)).not.toBeNull();
    expect(mailboxOf(`ann@${'d'.repeat(64)}.example`)).toBeNull();
  });
});

describe('checkedContact', () => {
  it('gives the contact to store: an SMS contact in E.164, a mailbox as given', () => {
    expect(checkedContact('sms', '+44 (0) 7911 123456')).toBe('+447911123456');
    expect(checkedContact('sms', '07911 123456', 'GB')).toBe('+447911123456');
    expect(checkedContact('email', 'Ann@Example.com')).toBe('Ann@Example.com');
  });

  it('refuses a contact of the wrong channel or shape with 422 INVALID_CONTACT naming the field', () => {
    for (const [channel, s] of [
      ['sms', 'ann@example.com'],
      ['email', '+447911123456'],
      ['sms', '07911 123456'],
    ] as const) {
      const err = (() => {
        try {
          checkedContact(channel, s);
        } catch (e) {
          return e;
        }
      })();
      expect(err, `${channel} ${s}`).toBeInstanceOf(AppError);
      expect(err).toMatchObject({ code: 'INVALID_CONTACT', status: 422, details: [{ path: 'contact' }] });
    }
  });
});

describe('contactIdentity', () => {
  it('reads a checked number as its digits, as the spellings the rules take all become one', () => {
    const checked = ['+44 7911 123456', '+44 (0) 7911 123456'].map((s) => checkedContact('sms', s));
    checked.push(checkedContact('sms', '07911 123456', 'GB'));
    expect(new Set(checked.map((c) => contactIdentity('sms', c)))).toEqual(new Set(['sms:447911123456']));
    expect(contactIdentity('sms', '+447911123457')).not.toBe(contactIdentity('sms', '+447911123456'));
  });

  it('reads rows written before contacts were checked by their digits', () => {
    const spellings = ['+15550100003', '+1 555 010 0003', '+1 (555) 010-0003', '0015550100003', '+15550100003\u200b', '＋１５５５０１００００３'];
    expect(new Set(spellings.map((c) => contactIdentity('sms', c)))).toEqual(new Set(['sms:15550100003']));
  });

  it("reads every spelling of one mailbox as one, Gmail's dots and googlemail.com included", () => {
    const gmail = ['victim@gmail.com', 'vic.tim@gmail.com', 'victim@googlemail.com', 'Vic.Tim+promo@GoogleMail.com', 'VICTIM@gmail.com'];
    expect(gmail.every((c) => mailboxOf(c) !== null)).toBe(true);
    expect(new Set(gmail.map((c) => contactIdentity('email', c)))).toEqual(new Set(['email:victim@gmail.com']));
    const other = ['ann@example.com', 'Ann@Example.COM', 'ann+promo@example.com', 'ann@example.com.', 'ａｎｎ@example.com'];
    expect(new Set(other.map((c) => contactIdentity('email', c)))).toEqual(new Set(['email:ann@example.com']));
    // Elsewhere a dot may tell two mailboxes apart.
    expect(contactIdentity('email', 'a.nn@example.com')).not.toBe(contactIdentity('email', 'ann@example.com'));
    expect(contactIdentity('email', 'bob@example.com')).not.toBe(contactIdentity('email', 'ann@example.com'));
    expect(contactIdentity('email', 'ann@example.org')).not.toBe(contactIdentity('email', 'ann@example.com'));
  });
});
