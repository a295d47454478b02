// A timer's delivery: the delivery room's job handler (core/delivery) under
// one job type per target kind (each with its own retry spacing), calling
// the sender of the firing's target. The job is scheduled at the fire time
// (Redis clock); the claim refuses a job due before its row (a firing moved
// later whose old job was not replaced yet).
import { type DeliveryDeps, type NotificationRow, type Sender, deliverJobId, deliveryJobHandler } from '../../core/delivery/index.js';
import type { Job, JobHandler, Queue, ScheduleInput } from '../../queue/index.js';
import type { AmqpTarget, NatsTarget, TargetKind, TargetSender, TimerTarget, WebhookTarget } from './targets/contract.js';
import type { FiringPayload } from './sql/reads.js';
import type { FiringJob } from './timers.service.js';

export const TIMER_JOB: Record<TargetKind, string> = { webhook: 'timer.webhook', amqp: 'timer.amqp', nats: 'timer.nats' };

/** The delivery job of a firing, at its fire time. */
export function firingJob(j: Pick<FiringJob, 'rowId' | 'dueAt' | 'firing'>, mode: 'nx' | 'upsert'): ScheduleInput {
  return {
    id: deliverJobId(j.rowId),
    type: TIMER_JOB[j.firing.target.type],
    at: j.dueAt,
    // The endpoint rides in the job, so the queue limiter knows it without the row.
    payload: { notificationId: j.rowId, endpoint: endpointOfTarget(j.firing.target) },
    maxAttempts: j.firing.maxAttempts,
    mode,
  };
}

/** A target's endpoint for the queue limiter's rules and slow-downs: its webhook host, exchange or subject. */
export function endpointOfTarget(t: TimerTarget): string {
  switch (t.type) {
    case 'webhook':
      return `webhook:${new URL(t.url).host.toLowerCase()}`;
    case 'amqp':
      return `amqp:${t.exchange}`;
    case 'nats':
      return `nats:${t.subject}`;
  }
}

/** The queue limiter's `limitKey` of a firing's job: the endpoint it carries (none in a job that only records an outcome). */
export function firingLimitKey(job: Job): string | null {
  const p = job.payload as { endpoint?: unknown } | null;
  return typeof p?.endpoint === 'string' ? p.endpoint : null;
}

export function scheduleFirings(queue: Queue, jobs: readonly FiringJob[]) {
  return queue.scheduleMany(jobs.map((j) => firingJob(j, j.mode)));
}

export type TargetSenders = {
  webhook: TargetSender<WebhookTarget>;
  amqp?: TargetSender<AmqpTarget> | undefined;
  nats?: TargetSender<NatsTarget> | undefined;
};

/** Sends a firing's row to its target: the body {key, payload, fireAt, firedAt, attempt}, the row's id as the message id. */
export function timerSender(senders: TargetSenders): Sender {
  return {
    name: ['webhook', senders.amqp && 'amqp', senders.nats && 'nats'].filter(Boolean).join('+'),
    async send(row: NotificationRow, signal: AbortSignal) {
      const f = row.payload as FiringPayload;
      const body = JSON.stringify({ key: f.key, payload: f.payload, fireAt: f.fireAt, firedAt: new Date().toISOString(), attempt: row.attempts + 1 });
      const m = { id: row.id, client: row.client, body };
      const t = f.target;
      switch (t.type) {
        case 'webhook':
          return senders.webhook.send(t, m, signal);
        case 'amqp':
          if (!senders.amqp) throw new Error('AMQP targets are off: the service has no AMQP_URL');
          return senders.amqp.send(t, m, signal);
        case 'nats':
          if (!senders.nats) throw new Error('NATS targets are off: the service has no NATS_URL');
          return senders.nats.send(t, m, signal);
      }
    },
  };
}

export function timersJobHandlers(deps: DeliveryDeps): Record<string, JobHandler> {
  const handler = deliveryJobHandler(deps);
  return Object.fromEntries(Object.values(TIMER_JOB).map((type) => [type, handler]));
}
