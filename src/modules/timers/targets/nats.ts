// Sends a timer's message to NATS JetStream over one connection, opened on the
// first send and reconnecting on its own without limit. A send resolves on the
// stream's PubAck; the message id rides as Nats-Msg-Id, so the stream drops a
// repeat within its duplicate window.
import { connect, ErrorCode, Events, NatsError, type JetStreamClient, type NatsConnection } from 'nats';
import type { Logger } from '../../../core/logger.js';
import type { NatsTarget, TargetSender, TimerMessage } from './contract.js';
import { withDeadline } from './deadline.js';

export type NatsSenderOptions = { readonly url: string; readonly timeoutMs: number; readonly log: Logger };

type Client = { readonly nc: NatsConnection; readonly js: JetStreamClient };

export function createNatsSender(opts: NatsSenderOptions): TargetSender<NatsTarget> {
  const { url, timeoutMs, log } = opts;
  let client: Client | null = null;
  // Sends that arrive before the first connect ends share it.
  let opening: Promise<Client> | null = null;
  let closed = false;

  function currentClient(): Promise<Client> {
    if (closed) return Promise.reject(new Error('NATS sender is closed'));
    // Closed only by a fatal error (reconnects are unlimited): connect afresh.
    if (client && !client.nc.isClosed()) return Promise.resolve(client);
    opening ??= openClient().finally(() => {
      opening = null;
    });
    return opening;
  }

  async function openClient(): Promise<Client> {
    const nc = await connect({ servers: url, maxReconnectAttempts: -1, timeout: timeoutMs });
    log.info('NATS connection opened');
    watch(nc, log);
    client = { nc, js: nc.jetstream() };
    return client;
  }

  async function publish(target: NatsTarget, message: TimerMessage, deadline: number): Promise<void> {
    const { js } = await currentClient();
    // JetStream's own request timeout ends with the send's deadline, so no request outlives it.
    const timeout = Math.max(1, Math.ceil(deadline - performance.now()));
    try {
      const ack = await js.publish(target.subject, Buffer.from(message.body), { msgID: message.id, timeout });
      // A duplicate: the stream already holds this id, so the message is delivered.
      if (ack.duplicate) log.debug({ messageId: message.id, stream: ack.stream }, 'NATS JetStream dropped a repeat');
    } catch (err) {
      throw publishError(target, err);
    }
  }

  return {
    send(target, message, signal) {
      const deadline = performance.now() + timeoutMs;
      const late = `NATS JetStream did not ack within ${timeoutMs} ms (subject '${target.subject}')`;
      return withDeadline(() => publish(target, message, deadline), timeoutMs, signal, late);
    },
    async close() {
      closed = true;
      await opening?.catch(() => undefined);
      const c = client;
      client = null;
      if (!c || c.nc.isClosed()) return;
      // drain() flushes what is buffered; while the server is away it would wait for a reconnect, so it gets the timeout.
      const drained = c.nc.drain().catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([drained, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
      clearTimeout(timer);
      if (!c.nc.isClosed()) await c.nc.close().catch(() => undefined);
    },
  };
}

/** Every error is retryable: a missing stream may be created, a timeout has an unknown outcome. */
function publishError(target: NatsTarget, err: unknown): Error {
  if (err instanceof NatsError && err.code === ErrorCode.NoResponders) {
    return new Error(`no NATS JetStream stream captures subject '${target.subject}' (no responders); a stream may yet be added`, { cause: err });
  }
  if (err instanceof NatsError && err.code === ErrorCode.Timeout) {
    return new Error(`NATS JetStream did not ack subject '${target.subject}' in time`, { cause: err });
  }
  const why = err instanceof Error ? err.message : String(err);
  return new Error(`NATS JetStream publish to subject '${target.subject}' failed: ${why}`, { cause: err });
}

/** Logs disconnects, reconnects and a fatal close; the client itself does the reconnecting. */
function watch(nc: NatsConnection, log: Logger): void {
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === Events.Disconnect) log.warn({ server: s.data }, 'NATS connection lost: reconnecting');
      else if (s.type === Events.Reconnect) log.info({ server: s.data }, 'NATS reconnected');
      else if (s.type === Events.Error) log.warn({ err: s.data }, 'NATS server reported an error');
    }
  })().catch((err: unknown) => log.warn({ err }, 'NATS status watch ended'));
  void nc.closed().then((err) => {
    if (err) log.warn({ err }, 'NATS connection closed');
  });
}
