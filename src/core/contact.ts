// What a contact may be, and who it reaches: an appointment's (by its
// channel) and an area's sorters' (either kind). An SMS contact is one valid
// phone number, kept in E.164; an e-mail contact is one mailbox (an
// addr-spec). Anything else, a list, a name with the address, a sentence, is
// refused, and so cannot reach a gateway that reads more into it than we did.
import { type CountryCode, parsePhoneNumberFromString } from 'libphonenumber-js';
import { z } from 'zod';
import { AppError } from './errors.js';

export type Channel = 'sms' | 'email';

/**
 * A phone number in E.164 (+447911123456), or null. International spellings
 * (`+44 7911 123456`, `+44 (0) 7911 123456`) are read as themselves; a
 * national one (`07911 123456`) only with a default region, since it says
 * nothing of its country. The whole string must be the number (no extraction
 * from text, so a list of two numbers is refused), valid by the library's
 * metadata (a known country code, a length and leading digits its plan
 * allows: the fictional 07700 900xxx range is not), and without an extension
 * (a text message cannot reach one).
 */
export function phoneNumberOf(raw: string, defaultRegion?: CountryCode): string | null {
  const n = parsePhoneNumberFromString(raw, { defaultCountry: defaultRegion, extract: false });
  return n && n.isValid() && !n.ext ? n.number : null;
}

// zod's own check (its default pattern), not RFC 5322's: a dot-atom of
// [A-Za-z0-9_'+-] before the @ and dotted host labels after, so quoted
// local parts, comments, display names, angle brackets, commas and spaces can
// never pass. It refuses internationalised mailboxes too (a Unicode local part
// or domain: give the domain in punycode), which a gateway may not take anyway.
const addrSpec = z.email();

/** One mailbox (ann@example.com), or null; RFC 5321's lengths: 64 before the @, 63 a host label, 254 in all. */
export function mailboxOf(raw: string): string | null {
  if (raw.length > 254 || !addrSpec.safeParse(raw).success) return null;
  const at = raw.lastIndexOf('@');
  if (
    at > 64 ||
    raw
      .slice(at + 1)
      .split('.')
      .some((label) => label.length > 63)
  )
    return null;
  return raw;
}

/**
 * The contact to store, as its channel reaches it: an SMS contact in E.164,
 * a mailbox as given. Refused with 422 INVALID_CONTACT naming the field.
 */
export function checkedContact(channel: Channel, raw: string, defaultRegion?: CountryCode): string {
  const contact = channel === 'sms' ? phoneNumberOf(raw, defaultRegion) : mailboxOf(raw);
  if (contact !== null) return contact;
  const message =
    channel === 'sms'
      ? `an sms contact is one phone number, international (+ and country code)${defaultRegion ? ` or national in ${defaultRegion}` : ''}`
      : 'an email contact is one address, name@domain: no display name, list, quotes or comments';
  throw new AppError('INVALID_CONTACT', 422, message, [{ path: 'contact', message }]);
}

/**
 * A contact of either kind (an area's sorters: a mailbox or a phone number),
 * stored as checkedContact stores it. Refused with 422 INVALID_CONTACT naming `field`.
 */
export function checkedAnyContact(raw: string, field: string, defaultRegion?: CountryCode): string {
  const contact = mailboxOf(raw) ?? phoneNumberOf(raw, defaultRegion);
  if (contact !== null) return contact;
  const message = `a contact is one address, name@domain, or one phone number, international (+ and country code)${defaultRegion ? ` or national in ${defaultRegion}` : ''}`;
  throw new AppError('INVALID_CONTACT', 422, message, [{ path: field, message }]);
}

/** Mail providers that ignore dots in the local part, and the domain they all answer as. */
const DOTLESS_DOMAINS: Readonly<Record<string, string>> = { 'gmail.com': 'gmail.com', 'googlemail.com': 'gmail.com' };

/**
 * Who a contact reaches, for the per-contact limit: a phone number as its
 * digits (its E.164 form without the +); a mailbox in NFKC lower case without
 * a +tag or the domain's trailing dot, and for Gmail without dots in the local
 * part and googlemail.com read as gmail.com. It takes a stored contact, so it
 * also reads rows written before contacts were checked (then a leading 00 is
 * read as +, and spaces, dashes, brackets and invisible characters dropped).
 */
export function contactIdentity(channel: Channel, contact: string): string {
  const plain = contact
    .normalize('NFKC')
    .replace(/[\p{Cf}\s]/gu, '')
    .toLowerCase();
  if (channel === 'sms') return `sms:${plain.replace(/^00/, '+').replace(/\D/g, '')}`;
  const at = plain.lastIndexOf('@');
  let local = (at < 0 ? plain : plain.slice(0, at)).replace(/\+.*$/, '');
  let domain = at < 0 ? '' : plain.slice(at + 1).replace(/\.+$/, '');
  const dotless = DOTLESS_DOMAINS[domain];
  if (dotless) {
    local = local.replaceAll('.', '');
    domain = dotless;
  }
  return `email:${local}@${domain}`;
}
