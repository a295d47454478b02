// Sends one notification to the outside world: a webhook (NOTIFY_WEBHOOK_URL,
// or its kind's own endpoint) or, without one, the log. The webhook gets the
// notification id as its Idempotency-Key and webhook-id, so a resend after a
// crash between the send and the SENT mark can be recognised by the receiver;
// a call is signed (Standard Webhooks) when its endpoint has a secret.
import type { Logger } from '../../core/logger.js';
import { NonRetryableError } from '../../queue/index.js';
import { signWebhook } from './webhook-signature.js';

export type OutgoingNotification = {
  readonly id: string;
  readonly kind: string;
  readonly channel: string | null;
  readonly recipient: string | null;
  readonly payload: unknown;
  readonly createdAt: Date;
};

export type Notifier = {
  readonly name: string;
  send(n: OutgoingNotification, signal: AbortSignal): Promise<void>;
};

export function createLoggingNotifier(log: Logger): Notifier {
  return {
    name: 'log',
    async send(n) {
      // A contact is personal data: at info level only what identifies the notification.
      log.info({ notificationId: n.id, kind: n.kind, channel: n.channel }, 'notification sent (log notifier)');
      log.debug({ notificationId: n.id, recipient: n.recipient, payload: n.payload }, 'notification sent (log notifier): content');
    },
  };
}

/** A receiver: where to POST, and the keys that sign each call (none: unsigned). */
export type WebhookEndpoint = { readonly url: string; readonly keys?: readonly Buffer[] };

export function createWebhookNotifier(endpoint: WebhookEndpoint, timeoutMs: number): Notifier {
  const keys = endpoint.keys ?? [];
  return {
    name: 'webhook',
    async send(n, signal) {
      const timeout = AbortSignal.timeout(timeoutMs);
      const body = JSON.stringify({ ...n, createdAt: n.createdAt.toISOString() });
      let res: Response;
      try {
        res = await fetch(endpoint.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': n.id, ...(keys.length > 0 && signWebhook(keys, n.id, body)) },
          body,
          signal: AbortSignal.any([signal, timeout]),
        });
      } catch (err) {
        if (timeout.aborted) throw new Error(`webhook did not answer within ${timeoutMs} ms`);
        throw err;
      }
      // The status decides; the body is not waited for: a success whose body
      // comes slowly is still a success (waiting for it under the timeout made
      // a delivered notification look failed, and sent it again).
      void res.body?.cancel().catch(() => {});
      if (res.ok) return;
      // The receiver says the request itself is wrong: sending it again cannot help.
      if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
        throw new NonRetryableError(`webhook refused the notification: HTTP ${res.status}`);
      }
      throw new Error(`webhook failed: HTTP ${res.status}`);
    },
  };
}

/** Sends each notification by its kind's notifier, `fallback` for the kinds without one. */
export function createRoutingNotifier(byKind: Readonly<Record<string, Notifier | undefined>>, fallback: Notifier): Notifier {
  const names = [...new Set([...Object.values(byKind).flatMap((x) => (x ? [x.name] : [])), fallback.name])];
  return {
    name: names.join('+'),
    send: (n, signal) => (byKind[n.kind] ?? fallback).send(n, signal),
  };
}
