// The webhook target: a POST of the timer's JSON to its URL, signed per
// Standard Webhooks with its client's own secrets (none: unsigned), the
// firing's id as webhook-id and Idempotency-Key on every attempt.
import { createWebhookPool } from '../../../core/webhook-call.js';
import { signWebhook } from '../../../core/webhook-signature.js';
import type { TargetSender, WebhookTarget } from './contract.js';

export function createWebhookSender(o: { timeoutMs: number; keysFor: (client: string) => Promise<readonly Buffer[]> }): TargetSender<WebhookTarget> {
  const call = createWebhookPool(o.timeoutMs, 'the timer');
  return {
    async send(target, m, signal) {
      const keys = await o.keysFor(m.client);
      // webhook-id even unsigned: a receiver drops a repeat by it either way.
      await call(new URL(target.url), m.body, { 'idempotency-key': m.id, 'webhook-id': m.id, ...(keys.length > 0 && signWebhook(keys, m.id, m.body)) }, signal);
    },
    async close() {},
  };
}
