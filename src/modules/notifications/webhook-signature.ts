// Signs outgoing webhooks per the Standard Webhooks specification
// (https://www.standardwebhooks.com): a receiver checks with any of its
// libraries that the call is ours and recent. Signed content is
// "<webhook-id>.<webhook-timestamp>.<body>", HMAC-SHA256 with each secret,
// so a receiver keeps working through a rotation while it knows either.
import { createHmac } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';
const MIN_KEY_BYTES = 16;

/** The keys of `NOTIFY_*_WEBHOOK_SECRET`: `whsec_<base64>` each, separated by spaces or commas. Throws without echoing a secret. */
export function parseWebhookSecrets(text: string): Buffer[] {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  if (parts.length === 0) throw new Error('no secret given');
  return parts.map((p, i) => {
    if (!p.startsWith(SECRET_PREFIX)) throw new Error(`secret ${i + 1} does not start with "${SECRET_PREFIX}"`);
    const b64 = p.slice(SECRET_PREFIX.length);
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) throw new Error(`secret ${i + 1} is not base64 after "${SECRET_PREFIX}"`);
    const key = Buffer.from(b64, 'base64');
    if (key.length < MIN_KEY_BYTES) throw new Error(`secret ${i + 1} is shorter than ${MIN_KEY_BYTES} bytes`);
    return key;
  });
}

/** The three headers of a signed call: `webhook-id` stays the same across retries, the timestamp is this attempt's. */
export function signWebhook(keys: readonly Buffer[], id: string, body: string, nowMs = Date.now()): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1_000));
  const content = `${id}.${timestamp}.${body}`;
  const signatures = keys.map((k) => `v1,${createHmac('sha256', k).update(content).digest('base64')}`);
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signatures.join(' ') };
}
