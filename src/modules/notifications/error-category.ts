// What an API client is shown of a notification's last error: a category, not
// the text. The text (kept in last_error for logs and the admin views) names a
// receiver's addresses, ports and redirect targets, which a client holding
// notifications:read has no business seeing.
import { REDIRECT_REFUSED } from '../../core/webhook-call.js';

/** Network failures before any answer, as Node's errors name them. */
const UNREACHABLE = /\b(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|EPIPE)\b|socket hang up/;
/** A TLS handshake that failed (an expired or unknown certificate, a wrong name). */
const TLS = /certificate|\bcert\b|\bSSL\b|\bTLS\b|altnames/i;

/** Recognised texts in order, first match wins; anything else is `failed`. */
const CATEGORIES: readonly (readonly [RegExp, (m: RegExpMatchArray) => string])[] = [
  [/^webhook did not answer within/, () => 'timeout'],
  [new RegExp(`^${REDIRECT_REFUSED}`), () => 'redirect refused'],
  [/^webhook refused the notification: HTTP (\d{3})/, (m) => `refused (HTTP ${m[1]})`],
  [/^webhook failed: HTTP (\d{3})/, (m) => `HTTP ${m[1]}`],
  [UNREACHABLE, () => 'unreachable'],
  [TLS, () => 'TLS failure'],
  // The delivery room's and the domains' own texts (core/delivery, a withdrawal's reason).
  [/^withdrawn; the outcome .* unknown/, () => 'withdrawn (outcome unknown)'],
  [/^appointment (moved|cancelled) before/, (m) => `withdrawn (appointment ${m[1]})`],
  [/^delivery given up: .*outcome is unknown/, () => 'given up (outcome unknown)'],
  [/^delivery given up/, () => 'given up'],
];

/** The category of a row's last_error shown to API clients; null when there is none. */
export function errorCategory(lastError: string | null): string | null {
  if (lastError === null) return null;
  for (const [pattern, name] of CATEGORIES) {
    const m = lastError.match(pattern);
    if (m) return name(m);
  }
  return 'failed';
}
