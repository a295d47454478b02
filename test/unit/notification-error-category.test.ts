// What GET /notifications shows of a row's last_error: a category for each
// text the notifier and the delivery statements write, never the text.
import { describe, expect, it } from 'vitest';
import { errorCategory } from '../../src/modules/notifications/error-category.js';

describe('errorCategory', () => {
  it.each([
    ['connect ECONNREFUSED 127.0.0.1:9', 'unreachable'],
    ['getaddrinfo ENOTFOUND hooks.internal.example', 'unreachable'],
    ['getaddrinfo EAI_AGAIN hooks.internal.example', 'unreachable'],
    ['read ECONNRESET', 'unreachable'],
    ['socket hang up', 'unreachable'],
    ['connect EHOSTUNREACH 10.0.0.7:443', 'unreachable'],
    ['self-signed certificate in certificate chain', 'TLS failure'],
    ["Hostname/IP does not match certificate's altnames: Host: a. is not in the cert's altnames: DNS:b", 'TLS failure'],
    ['webhook did not answer within 5000 ms', 'timeout'],
    ['webhook failed: HTTP 503', 'HTTP 503'],
    ['webhook failed: HTTP 429', 'HTTP 429'],
    ['webhook refused the notification: HTTP 404', 'refused (HTTP 404)'],
    [
      "webhook redirect not followed: HTTP 307 (to http://169.254.169.254/latest/api/token): only 3 redirects by 307 or 308 within the endpoint's origin (https://hooks.example) are followed; set the endpoint's URL",
      'redirect refused',
    ],
    ['withdrawn; the outcome of a call interrupted before it was recorded is unknown', 'withdrawn (outcome unknown)'],
    ['appointment moved before the reminder was delivered', 'withdrawn (appointment moved)'],
    ['appointment cancelled before the reminder was delivered', 'withdrawn (appointment cancelled)'],
    ['delivery given up: its job was dead-lettered during a call whose outcome is unknown', 'given up (outcome unknown)'],
    ['delivery given up: its job was dead-lettered before the outcome was recorded (see the dead set)', 'given up'],
    ['something nobody foresaw at 10.1.2.3:8443', 'failed'],
  ])('shows %j as %j', (text, category) => {
    expect(errorCategory(text)).toBe(category);
  });

  it('shows no error as none', () => {
    expect(errorCategory(null)).toBeNull();
  });

  it('never passes on an address, a port or a redirect target', () => {
    const texts = ['connect ECONNREFUSED 127.0.0.1:9', 'webhook redirect not followed: HTTP 308 (to http://127.0.0.1:8080/x)', 'odd 10.0.0.1:5432'];
    for (const t of texts) expect(errorCategory(t)).not.toMatch(/\d+\.\d+\.\d+\.\d+|:\d{2,5}|http/);
  });
});
