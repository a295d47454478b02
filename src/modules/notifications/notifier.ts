// Sends one notification to the outside world: a webhook (NOTIFY_WEBHOOK_URL,
// or its kind's own endpoint) or, without one, the log. The webhook gets the
// notification id as its Idempotency-Key and webhook-id, so a resend after a
// crash between the send and the SENT mark can be recognised by the receiver;
// a call is signed (Standard Webhooks) when its endpoint has a secret.
import type { Logger } from '../../core/logger.js';
import { createWebhookCaller } from '../../core/webhook-call.js';
import { signWebhook } from '../../core/webhook-signature.js';

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
  const call = createWebhookCaller(endpoint.url, timeoutMs);
  return {
    name: 'webhook',
    async send(n, signal) {
      const body = JSON.stringify({ ...n, createdAt: n.createdAt.toISOString() });
      await call(body, { 'idempotency-key': n.id, ...(keys.length > 0 && signWebhook(keys, n.id, body)) }, signal);
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
