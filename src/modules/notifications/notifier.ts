// Sends one notification to the outside world: a webhook (NOTIFY_WEBHOOK_URL)
// or, without one, the log. The webhook gets the notification id as its
// Idempotency-Key, so a resend after a crash between the send and the SENT mark
// can be recognised by the receiver.
import type { Logger } from '../../core/logger.js';
import { NonRetryableError } from '../../queue/index.js';

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
      log.info({ notificationId: n.id, kind: n.kind, channel: n.channel, recipient: n.recipient, payload: n.payload }, 'notification sent (log notifier)');
    },
  };
}

export function createWebhookNotifier(url: string, timeoutMs: number): Notifier {
  return {
    name: 'webhook',
    async send(n, signal) {
      const timeout = AbortSignal.timeout(timeoutMs);
      let res: Response;
      try {
        res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': n.id },
          body: JSON.stringify({ ...n, createdAt: n.createdAt.toISOString() }),
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
