// Sends a timer's message to an AMQP 0-9-1 exchange (RabbitMQ) over one
// connection and one confirm channel, opened on the first send and again after
// either closes. A send resolves only on the broker's publisher confirm. An
// exchange is checked on a probe channel before it is published to, so a
// missing one (a 404 closes the channel) never takes the shared confirm channel down.
import { connect, type Channel, type ChannelModel, type ConfirmChannel, type Message } from 'amqplib';
import type { Logger } from '../../../core/logger.js';
import type { AmqpTarget, TargetSender, TimerMessage } from './contract.js';
import { withDeadline } from './deadline.js';

export type AmqpSenderOptions = { readonly url: string; readonly timeoutMs: number; readonly log: Logger };

/** Reply code of a channel the broker closed because something it names (here: the exchange) does not exist. */
const NOT_FOUND = 404;
/** The error amqplib hands a publish's confirm callback on a basic.nack (a channel close hands another). */
const NACKED = 'message nacked';
/** How long an exchange found is trusted before it is checked again: one deleted later is soon found missing on the probe. */
const EXCHANGE_SEEN_MS = 30_000;

type Connection = { readonly model: ChannelModel; open: boolean; error: Error | null };

/** A publish awaiting its confirm; `returned` once the broker handed it back as unroutable. */
type InFlight = { returned: boolean };

type Link = {
  readonly conn: Connection;
  readonly channel: ConfirmChannel;
  open: boolean;
  /** Why the broker closed the channel: a 404 names the missing exchange. */
  error: Error | null;
  /** Set while publish() reported a full write buffer; settles on 'drain' or on close. */
  drained: Promise<void> | null;
  /** Publishes awaiting their confirm, by message id: a basic.return names only the message. */
  readonly inFlight: Map<string, InFlight[]>;
};

/** The plain channel that checks exchanges exist; a 404 closes it, and the next check opens another. */
type Probe = { readonly conn: Connection; readonly channel: Channel; open: boolean; error: Error | null };

export function createAmqpSender(opts: AmqpSenderOptions): TargetSender<AmqpTarget> {
  const { url, timeoutMs, log } = opts;
  let conn: Connection | null = null;
  let link: Link | null = null;
  // Sends that arrive while the channel is being (re)opened share this one attempt,
  // rather than each opening a connection of its own.
  let opening: Promise<Link> | null = null;
  let probe: Probe | null = null;
  let probeOpening: Promise<Probe> | null = null;
  /** Exchanges the broker said exist, with when it said so (performance.now() ms). */
  const seen = new Map<string, number>();
  /** The check under way per exchange, shared by the sends that arrive meanwhile. */
  const checking = new Map<string, Promise<void>>();
  let closed = false;

  function currentLink(): Promise<Link> {
    if (closed) return Promise.reject(new Error('AMQP sender is closed'));
    if (link?.open) return Promise.resolve(link);
    opening ??= openLink().finally(() => {
      opening = null;
    });
    return opening;
  }

  async function openLink(): Promise<Link> {
    if (!conn?.open) conn = await openConnection(url, timeoutMs, log);
    const l: Link = { conn, channel: await conn.model.createConfirmChannel(), open: true, error: null, drained: null, inFlight: new Map() };
    l.channel.on('error', (err: Error) => {
      l.error = err;
      log.warn({ err }, 'AMQP channel closed by the broker');
    });
    l.channel.on('close', () => {
      l.open = false;
    });
    l.channel.on('return', (msg: Message) => markReturned(l, msg));
    link = l;
    return l;
  }

  function exchangeExists(exchange: string): Promise<void> {
    const at = seen.get(exchange);
    if (at !== undefined && performance.now() - at < EXCHANGE_SEEN_MS) return Promise.resolve();
    let check = checking.get(exchange);
    if (!check) {
      check = checkExchange(exchange).finally(() => checking.delete(exchange));
      checking.set(exchange, check);
    }
    return check;
  }

  async function checkExchange(exchange: string): Promise<void> {
    // Checks queue up on the one probe channel; a 404 answers the check at the head
    // and ends the others unanswered, so those ask again on a fresh channel. Each
    // round answers at least its first check, so this ends.
    for (;;) {
      const p = await currentProbe();
      try {
        await p.channel.checkExchange(exchange);
        seen.set(exchange, performance.now());
        return;
      } catch (err) {
        if (notFound(err, exchange)) throw missingExchange(exchange, p.error ?? (err as Error));
        if (!closed && notFound(p.error) && p.conn.open) continue;
        const why = (p.error ?? p.conn.error ?? (err instanceof Error ? err : new Error(String(err)))).message;
        throw new Error(`AMQP could not check that exchange '${exchange}' exists: ${why}`, { cause: err });
      }
    }
  }

  function currentProbe(): Promise<Probe> {
    if (probe?.open) return Promise.resolve(probe);
    probeOpening ??= openProbe().finally(() => {
      probeOpening = null;
    });
    return probeOpening;
  }

  async function openProbe(): Promise<Probe> {
    const { conn: c } = await currentLink();
    const p: Probe = { conn: c, channel: await c.model.createChannel(), open: true, error: null };
    // A 404 here is an answer, not trouble: the check that caused it reports it.
    p.channel.on('error', (err: Error) => {
      p.error = err;
    });
    p.channel.on('close', () => {
      p.open = false;
    });
    probe = p;
    return p;
  }

  async function publish(target: AmqpTarget, message: TimerMessage): Promise<void> {
    if (target.exchange !== '') await exchangeExists(target.exchange);
    let l = await currentLink();
    // Publisher flow control: past the write buffer's mark, wait for it to drain
    // rather than pile frames up in memory while the broker throttles the socket.
    while (l.drained) {
      await l.drained;
      l = await currentLink();
    }
    const entry: InFlight = { returned: false };
    const ch = l;
    return new Promise<void>((resolve, reject) => {
      const onConfirm = (err: unknown) => {
        untrack(ch, message.id, entry);
        if (entry.returned) reject(new Error(`AMQP message unroutable: exchange '${target.exchange}' routes routing key '${target.routingKey}' to no queue`));
        else if (err) reject(failed(ch, target, err));
        else resolve();
      };
      track(ch, message.id, entry);
      let flowing: boolean;
      try {
        flowing = ch.channel.publish(
          target.exchange,
          target.routingKey,
          Buffer.from(message.body),
          { persistent: true, mandatory: true, messageId: message.id, contentType: 'application/json', headers: { 'x-client': message.client } },
          onConfirm,
        );
      } catch (err) {
        // The channel closed between the check above and this publish.
        untrack(ch, message.id, entry);
        reject(failed(ch, target, err));
        return;
      }
      if (!flowing) ch.drained ??= waitForDrain(ch);
    });
  }

  function failed(l: Link, target: AmqpTarget, err: unknown): Error {
    // Deleted since it was last checked: the next send checks it again on the probe.
    if (notFound(l.error, target.exchange)) seen.delete(target.exchange);
    return confirmError(l, target, err);
  }

  return {
    send(target, message, signal) {
      const late = `AMQP broker did not confirm within ${timeoutMs} ms (exchange '${target.exchange}', routing key '${target.routingKey}')`;
      return withDeadline(() => publish(target, message), timeoutMs, signal, late);
    },
    async close() {
      closed = true;
      await opening?.catch(() => undefined);
      await probeOpening?.catch(() => undefined);
      const l = link;
      const p = probe;
      const c = conn;
      link = null;
      probe = null;
      conn = null;
      // Each close waits for the broker's close-ok, which a silent connection never sends: bounded, then the socket goes.
      await Promise.all([l && within(timeoutMs, () => l.channel.close()), p?.open && within(timeoutMs, () => p.channel.close())]);
      if (c) await within(timeoutMs, () => c.model.close());
      if (c?.open) destroySocket(c.model);
    },
  };
}

async function openConnection(url: string, timeoutMs: number, log: Logger): Promise<Connection> {
  // The socket timeout bounds the connect to a host that never answers; amqplib lifts it once open.
  const model = await connect(url, { timeout: timeoutMs });
  const c: Connection = { model, open: true, error: null };
  model.on('error', (err: Error) => {
    c.error = err;
    log.warn({ err }, 'AMQP connection lost');
  });
  model.on('close', () => {
    c.open = false;
  });
  model.on('blocked', (reason: unknown) => log.warn({ reason }, 'AMQP broker blocks publishing (resource alarm): sends wait'));
  model.on('unblocked', () => log.info('AMQP broker unblocked publishing'));
  log.info('AMQP connection opened');
  return c;
}

/** Why a publish was not confirmed: a nack, or the channel (or its connection) closed under it. All retryable. */
function confirmError(l: Link, target: AmqpTarget, err: unknown): Error {
  const cause = l.error ?? l.conn.error;
  if (!cause && err instanceof Error && err.message === NACKED) {
    return new Error(`AMQP broker refused the message (nack) for exchange '${target.exchange}'`);
  }
  if (cause && notFound(cause, target.exchange)) return missingExchange(target.exchange, cause);
  const why = cause?.message ?? (err instanceof Error ? err.message : String(err));
  return new Error(`AMQP channel closed before the broker confirmed the message for exchange '${target.exchange}': ${why}`, { cause: cause ?? err });
}

/** The one error for a missing exchange, found by the probe or (deleted since) by a publish: retryable. */
function missingExchange(exchange: string, cause: Error): Error {
  return new Error(`AMQP exchange '${exchange}' does not exist (${cause.message}); it may yet be declared`, { cause });
}

/** Whether `err` is a broker 404 (a channel close); with `exchange`, one that names it. */
function notFound(err: unknown, exchange?: string): boolean {
  if (!(err instanceof Error) || (err as { code?: unknown }).code !== NOT_FOUND) return false;
  return exchange === undefined || err.message.includes(`'${exchange}'`);
}

function track(l: Link, id: string, entry: InFlight): void {
  const list = l.inFlight.get(id);
  if (list) list.push(entry);
  else l.inFlight.set(id, [entry]);
}

function untrack(l: Link, id: string, entry: InFlight): void {
  const list = l.inFlight.get(id);
  if (!list) return;
  const at = list.indexOf(entry);
  if (at >= 0) list.splice(at, 1);
  if (list.length === 0) l.inFlight.delete(id);
}

/**
 * A basic.return comes before its publish's confirm, so it marks the publish
 * and the confirm rejects it. Two publishes of one id in flight (a retry after
 * a timeout) are told apart by order only; the worse mix-up reports the routed
 * one as unroutable, and the retry that follows is dropped by its id.
 */
function markReturned(l: Link, msg: Message): void {
  const id: unknown = msg.properties.messageId;
  const entry = typeof id === 'string' ? l.inFlight.get(id)?.find((e) => !e.returned) : undefined;
  if (entry) entry.returned = true;
}

function waitForDrain(l: Link): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      l.channel.off('drain', done);
      l.channel.off('close', done);
      l.drained = null;
      resolve();
    };
    l.channel.on('drain', done);
    l.channel.on('close', done);
  });
}

/** Runs a close, done when it ends, fails (amqplib throws on what is already closed) or `ms` pass. */
async function within(ms: number, close: () => Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const closing = (async () => close())().catch(() => undefined);
  await Promise.race([closing, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/**
 * Ends a connection whose close the broker never confirmed. amqplib keeps the
 * socket as `connection.stream` and offers no public way to drop it; left
 * alone, it lingers until the heartbeat gives up.
 */
function destroySocket(model: ChannelModel): void {
  const stream = (model.connection as unknown as { stream?: { destroy?: () => void } }).stream;
  stream?.destroy?.();
}
