// The webhook secrets' text format (`NOTIFY_*_WEBHOOK_SECRET`), read by the
// config at start: `whsec_<base64>` keys as the Standard Webhooks libraries
// write them, several during a rotation. The signing itself lives with the
// notifications that send the webhooks.

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
