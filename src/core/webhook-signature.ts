// Signs outgoing webhooks (notifications', timers') per the Standard Webhooks specification
// (https://www.standardwebhooks.com): a receiver checks with any of its
// libraries that the call is ours and recent. Signed content is
// "<webhook-id>.<webhook-timestamp>.<body>", HMAC-SHA256 with each secret,
// so a receiver keeps working through a rotation while it knows either. The
// keys come parsed from the config (core/webhook-secrets.ts).
import { createHmac } from 'node:crypto';

/** The three headers of a signed call: `webhook-id` stays the same across retries, the timestamp is this attempt's. */
export function signWebhook(keys: readonly Buffer[], id: string, body: string, nowMs = Date.now()): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1_000));
  const content = `${id}.${timestamp}.${body}`;
  const signatures = keys.map((k) => `v1,${createHmac('sha256', k).update(content).digest('base64')}`);
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signatures.join(' ') };
}
