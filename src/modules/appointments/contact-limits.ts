// The limits every reminder a client sets up passes before anything is
// written: the client's distinct contacts of the hour, then the contact's
// reminders of the hour within the client.
import { createHash } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import { type DistinctLimit, type RateLimit, retryAfterSeconds } from '../../core/rate-limit.js';
import { type Channel, contactIdentity } from '../../core/contact.js';

export function createContactLimits(d: {
  /** Reminders booked or moved per contact (REMINDERS_PER_CONTACT_PER_HOUR). */
  perContact: RateLimit;
  /** Distinct contacts per client in a sliding hour (CLIENT_CONTACTS_PER_HOUR); none: no such limit. */
  clientContacts?: DistinctLimit | undefined;
}) {
  /**
   * A booking or a move by client `client` sets up a reminder to this
   * contact: refused (429, nothing written) past the client's distinct
   * contacts of the hour, then past the contact's hourly limit within the
   * client. The first bounds what one client can spend on the paid channel,
   * the second protects the person behind the number from one client's
   * flood; both are the client's own, so no client can use up or read
   * another's allowance. Both are keyed by a hash of the contact as its
   * channel reaches it (contactIdentity), so other spellings of one number or
   * mailbox count as one and no contact is written into a Redis key. The
   * client's limit comes first: a contact it admits stays in the client's hour
   * even if the contact's own limit refuses, which only readmits it later.
   * Every reminder a client sets up passes here, before anything is written.
   */
  return async function mayRemind(client: string, channel: Channel, contact: string): Promise<void> {
    const identity = contactIdentity(channel, contact);
    const hashOf = (s: string) => createHash('sha256').update(s).digest('hex');
    const mine = d.clientContacts ? await d.clientContacts.admit(client, hashOf(identity)) : null;
    if (mine && !mine.ok) {
      throw new AppError('CLIENT_CONTACTS_LIMITED', 429, 'this client has reminded its hourly number of distinct contacts', undefined, {
        'Retry-After': retryAfterSeconds(mine.retryAfterMs),
      });
    }
    // A client id has no newline: the pair is unambiguous.
    const verdict = await d.perContact.take(hashOf(`${client}\n${identity}`));
    if (verdict.ok) return;
    throw new AppError('CONTACT_RATE_LIMITED', 429, 'this contact has had its hourly number of reminders booked or moved', undefined, {
      'Retry-After': retryAfterSeconds(verdict.retryAfterMs),
    });
  };
}
