// What a timer's delivery hands to its target, and what each target kind
// (webhook, AMQP, NATS JetStream) promises back: `send` resolves only when
// the target confirmed the message (a 2xx, a publisher confirm, a JetStream
// ack), throws NonRetryableError when sending again cannot help, and throws
// anything else for a retry. The message id is the delivery row's id: the
// same on every attempt, so a receiver or broker drops a repeat by it.

export type WebhookTarget = { readonly type: 'webhook'; readonly url: string };
export type AmqpTarget = { readonly type: 'amqp'; readonly exchange: string; readonly routingKey: string };
export type NatsTarget = { readonly type: 'nats'; readonly subject: string };
export type TimerTarget = WebhookTarget | AmqpTarget | NatsTarget;
export type TargetKind = TimerTarget['type'];

export type TimerMessage = {
  /** Stable across retries: webhook-id / Idempotency-Key, AMQP message-id, Nats-Msg-Id. */
  readonly id: string;
  /** The client whose timer it is (its webhook secret signs the call). */
  readonly client: string;
  /** The JSON body: {key, payload, fireAt, firedAt, attempt}. */
  readonly body: string;
};

export type TargetSender<T extends TimerTarget> = {
  send(target: T, message: TimerMessage, signal: AbortSignal): Promise<void>;
  /** Closes its connections (at shutdown). */
  close(): Promise<void>;
};
