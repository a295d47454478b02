// The ends of the timers benchmark's deliveries, in the bench process: a
// webhook receiver (node:http, 204 at once), a consumer of a durable queue
// bound to an AMQP exchange, and a consumer of a JetStream stream capturing
// a subject. Each records, per timer key, when its message arrived; lateness
// is that minus the body's fireAt, both on this machine's wall clock.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect as amqpConnect } from 'amqplib';
import { AckPolicy, connect as natsConnect, DeliverPolicy, StorageType } from 'nats';
import { type Percentiles, percentiles } from './bench-util.js';

export type TargetKind = 'webhook' | 'amqp' | 'nats';
export type Target = { type: 'webhook'; url: string } | { type: 'amqp'; exchange: string; routingKey: string } | { type: 'nats'; subject: string };

/** Wall-clock ms with a fraction: Date.now() alone rounds every arrival down to the ms. */
const nowMs = () => performance.timeOrigin + performance.now();

/** Arrivals of one delivery phase: the first of each key (its lateness) and the repeats. */
export type Arrivals = {
  readonly unique: () => number;
  readonly duplicates: () => number;
  /** Lateness (ms) of each key's first arrival: p50, p99, max, ... */
  readonly lateness: () => Percentiles | null;
  /** First arrivals later than `ms`. */
  readonly laterThan: (ms: number) => number;
  /** p50, p99 and max lateness (ms) of the timers due in each second from `fromMs` (ms since epoch): a backlog shows as a climb. */
  readonly bySecond: (fromMs: number) => { s: number; n: number; p50: number; p99: number; max: number }[];
};

/** Where the receivers record; `prefix` selects the keys of the phase under way (the others are counted as strays). */
export function createArrivalLog() {
  let prefix = '\u0000';
  /** Lateness (ms) and fire time (ms since epoch) of each key's first arrival. */
  let first = new Map<string, { late: number; due: number }>();
  let duplicates = 0;
  let strays = 0;
  return {
    record(body: string): void {
      const at = nowMs();
      const m = JSON.parse(body) as { key: string; fireAt: string };
      if (!m.key.startsWith(prefix)) {
        strays++;
        return;
      }
      if (first.has(m.key)) duplicates++;
      else {
        const due = Date.parse(m.fireAt);
        first.set(m.key, { late: at - due, due });
      }
    },
    /** Starts a phase: arrivals of keys under `p` are its own. */
    phase(p: string): Arrivals {
      prefix = p;
      const own = (first = new Map());
      duplicates = 0;
      const lates = () => [...own.values()].map((v) => v.late);
      return {
        unique: () => own.size,
        duplicates: () => duplicates,
        lateness: () => percentiles(lates()),
        laterThan: (ms) => lates().filter((v) => v > ms).length,
        bySecond(fromMs) {
          const buckets: number[][] = [];
          for (const v of own.values()) (buckets[Math.max(0, Math.floor((v.due - fromMs) / 1_000))] ??= []).push(v.late);
          return buckets.flatMap((b, s) => {
            const p = b ? percentiles(b) : null;
            return p ? [{ s, n: p.count, p50: p.p50, p99: p.p99, max: p.max }] : [];
          });
        },
      };
    },
    strays: () => strays,
  };
}
export type ArrivalLog = ReturnType<typeof createArrivalLog>;

export type Receiver = { readonly kind: TargetKind; readonly target: Target; readonly close: () => Promise<void> };

/** A webhook receiver on 127.0.0.1: reads the body, records it, answers 204. */
export async function startWebhookReceiver(log: ArrivalLog): Promise<Receiver & { host: string }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      log.record(Buffer.concat(chunks).toString());
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    kind: 'webhook',
    host: `127.0.0.1:${port}`,
    target: { type: 'webhook', url: `http://127.0.0.1:${port}/timers` },
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * A durable direct exchange and a durable queue bound to it, consumed here
 * with automatic acks: what a consumer of persistent messages would declare,
 * so the broker's confirm of each publish waits as it would in production.
 * Both are deleted at close.
 */
export async function startAmqpConsumer(url: string, name: string, log: ArrivalLog): Promise<Receiver> {
  const conn = await amqpConnect(url);
  const ch = await conn.createChannel();
  const routingKey = 'fire';
  await ch.assertExchange(name, 'direct', { durable: true });
  await ch.assertQueue(name, { durable: true });
  await ch.bindQueue(name, name, routingKey);
  const { consumerTag } = await ch.consume(name, (msg) => msg && log.record(msg.content.toString()), { noAck: true });
  return {
    kind: 'amqp',
    target: { type: 'amqp', exchange: name, routingKey },
    async close() {
      await ch.cancel(consumerTag).catch(() => undefined);
      await ch.deleteQueue(name).catch(() => undefined);
      await ch.deleteExchange(name).catch(() => undefined);
      await conn.close().catch(() => undefined);
    },
  };
}

/**
 * A JetStream stream (file storage, the server's default) capturing
 * `<subjectPrefix>.>` and a pull consumer of it without acks, consumed here.
 * The stream is deleted at close.
 */
export async function startNatsConsumer(url: string, stream: string, subjectPrefix: string, log: ArrivalLog): Promise<Receiver> {
  const nc = await natsConnect({ servers: url });
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name: stream, subjects: [`${subjectPrefix}.>`], storage: StorageType.File });
  const { name } = await jsm.consumers.add(stream, { ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.New });
  const consumer = await nc.jetstream().consumers.get(stream, name);
  const messages = await consumer.consume({ max_messages: 1_000 });
  const reading = (async () => {
    for await (const m of messages) log.record(m.string());
  })();
  return {
    kind: 'nats',
    target: { type: 'nats', subject: `${subjectPrefix}.fire` },
    async close() {
      await messages.close().catch(() => undefined);
      await reading.catch(() => undefined);
      await jsm.streams.delete(stream).catch(() => undefined);
      await nc.close().catch(() => undefined);
    },
  };
}
