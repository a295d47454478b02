// Timers delivered to the real brokers on this machine (RabbitMQ :5672, NATS
// JetStream :4222) by a real service: the message, its id (the firing's, the
// same on every attempt) and its persistence, never before the fire time;
// then a broker lost while timers fire. The brokers are the machine's shared
// ones, so the outage is a TCP proxy between the service and each broker
// (every connection reset, new ones refused for a while): every timer ends
// DELIVERED, every key arrives, and a repeat carries the same message id.
import { randomUUID } from 'node:crypto';
import { connect as amqpConnect, type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import { connect as natsConnect, nanos, StorageType, type JetStreamManager, type NatsConnection, type StoredMsg } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
/** Long enough for a state to settle on a machine twice as slow as a busy CI runner. */
const SETTLE_MS = 30_000;
/** Timers of an outage run, due over STORM_SPREAD_MS. */
const STORM = 200;
const STORM_SPREAD_MS = 2_000;
/** How long the broker refuses connections, while the storm's timers come due. */
const OUTAGE_MS = 2_000;

const run = randomUUID().slice(0, 8);
const exchange = `timers-e2e-${run}`;
const stream = `TIMERS_E2E_${run}`;
const subjects = `timers-e2e.${run}`;

type TimerBody = { key: string; payload: unknown; fireAt: string; firedAt: string; attempt: number };
type TimerJson = { key: string; state: string; fireAt: string; attempts: number; deliveredAt: string | null };
type Got = { at: number; msg: ConsumeMessage; body: TimerBody };

let tdb: TestDb;
let svc: TestService;
let amqpProxy: TcpProxy;
let natsProxy: TcpProxy;
let amqp: ChannelModel;
let ch: Channel;
let nc: NatsConnection;
let jsm: JetStreamManager;
/** What each AMQP queue of this file received, as it came. */
const received: Record<'one' | 'storm', Got[]> = { one: [], storm: [] };

const amqpTarget = (routingKey: 'one' | 'storm') => ({ type: 'amqp', exchange, routingKey }) as const;
const natsTarget = (token: 'one' | 'storm') => ({ type: 'nats', subject: `${subjects}.${token}` }) as const;

/** Every timer's current firing id (the message id) by key, for keys starting with `prefix`. */
async function rowIds(prefix: string): Promise<Map<string, string>> {
  const rows = await tdb.db.$queryRaw<{ key: string; id: string }[]>`
    SELECT key, notification_id::text AS id FROM timers WHERE client = 'default' AND left(key, ${prefix.length}) = ${prefix}`;
  return new Map(rows.map((r) => [r.key, r.id]));
}

async function timersOf(prefix: string): Promise<TimerJson[]> {
  const r = await svc.api().get(`/timers?prefix=${prefix}&limit=1000`);
  expect(r.status).toBe(200);
  return r.body.timers as TimerJson[];
}

async function waitDelivered(prefix: string, n: number): Promise<TimerJson[]> {
  let last: TimerJson[] = [];
  const done = await waitFor(
    async () => {
      last = await timersOf(prefix);
      return last.length === n && last.every((t) => t.state === 'DELIVERED');
    },
    SETTLE_MS,
    100,
  );
  const states = last.reduce<Record<string, number>>((m, t) => ({ ...m, [t.state]: (m[t.state] ?? 0) + 1 }), {});
  expect(done, `every ${prefix} timer DELIVERED (states: ${JSON.stringify(states)})`).toBe(true);
  return last;
}

/** The stream's messages on `subject`, read one by one by sequence. */
async function streamMessages(subject: string): Promise<StoredMsg[]> {
  const { state } = await jsm.streams.info(stream);
  const out: StoredMsg[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(stream, { seq });
    if (m.subject === subject) out.push(m);
  }
  return out;
}

/** Makes `n` timers with keys `<prefix><i>` due over the storm's spread, in one batch. */
async function storm(prefix: string, target: ReturnType<typeof amqpTarget> | ReturnType<typeof natsTarget>): Promise<Map<string, number>> {
  const timers = Array.from({ length: STORM }, (_, i) => ({
    key: `${prefix}${i}`,
    delayMs: 1_000 + Math.floor((i * STORM_SPREAD_MS) / STORM),
    target,
    payload: { i },
    // Enough attempts to outlast the outage whatever the machine's pace.
    maxAttempts: 30,
  }));
  const r = await svc.api().post('/timers/batch').send({ timers });
  expect(r.status).toBe(200);
  const results = r.body.results as { key: string; status: number; timer: TimerJson }[];
  expect(results.every((x) => x.status === 201)).toBe(true);
  return new Map(results.map((x) => [x.key, Date.parse(x.timer.fireAt)]));
}

/** Resets the broker's connections and refuses new ones for OUTAGE_MS; how many connections were cut. */
async function outage(proxy: TcpProxy): Promise<number> {
  const refusing = proxy.refuse(OUTAGE_MS);
  const cut = proxy.dropAll();
  await refusing;
  return cut;
}

beforeAll(async () => {
  amqp = await amqpConnect(AMQP_URL);
  ch = await amqp.createChannel();
  await ch.assertExchange(exchange, 'direct', { durable: false });
  for (const key of ['one', 'storm'] as const) {
    const queue = `${exchange}.${key}`;
    await ch.assertQueue(queue, { durable: false });
    await ch.bindQueue(queue, exchange, key);
    await ch.consume(queue, (msg) => msg && received[key].push({ at: Date.now(), msg, body: JSON.parse(msg.content.toString()) as TimerBody }), {
      noAck: true,
    });
  }
  nc = await natsConnect({ servers: NATS_URL });
  jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name: stream, subjects: [`${subjects}.>`], storage: StorageType.Memory, duplicate_window: nanos(120_000) });
  amqpProxy = await startTcpProxy({ port: Number(new URL(AMQP_URL).port) });
  natsProxy = await startTcpProxy({ port: Number(new URL(NATS_URL).port) });
  tdb = await createTestDb('timers_brokers');
  svc = await startTestService(tdb.url, {
    AMQP_URL: `amqp://guest:guest@127.0.0.1:${amqpProxy.port}`,
    NATS_URL: `nats://127.0.0.1:${natsProxy.port}`,
    TIMER_AMQP_EXCHANGES: exchange,
    TIMER_NATS_SUBJECTS: `${subjects}.`,
    TIMER_AMQP_RETRY_DELAYS_MS: '200,500,1000',
    TIMER_NATS_RETRY_DELAYS_MS: '200,500,1000',
    NOTIFY_RETRY_JITTER: '0',
    // A send lost with its connection ends by this timeout, then retries.
    NOTIFY_TIMEOUT_MS: '3000',
    TIMER_RELAY_INTERVAL_SECONDS: '3600',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await amqpProxy?.close();
  await natsProxy?.close();
  for (const key of ['one', 'storm']) await ch?.deleteQueue(`${exchange}.${key}`);
  await ch?.deleteExchange(exchange);
  await amqp?.close();
  await jsm?.streams.delete(stream).catch(() => undefined);
  await nc?.close();
});

describe('timers delivered to AMQP', () => {
  it('publishes {key, payload, fireAt, firedAt, attempt} persistent, the firing as message-id, no earlier than fireAt; DELIVERED, attempts 1', async () => {
    const put = await svc
      .api()
      .put('/timers/amqp-one')
      .send({ delayMs: 300, target: amqpTarget('one'), payload: { order: 7 } });
    expect(put.status).toBe(201);
    const fireAt = Date.parse(put.body.fireAt);
    const [t] = await waitDelivered('amqp-one', 1);
    expect(t).toMatchObject({ attempts: 1 });
    expect(Date.parse(t?.deliveredAt as string)).toBeGreaterThanOrEqual(fireAt);
    // Confirmed means queued; the consumer's copy is on its way.
    expect(await waitFor(() => received.one.length >= 1, SETTLE_MS)).toBe(true);
    expect(received.one).toHaveLength(1);
    const got = received.one[0] as Got;
    expect(got.body).toEqual({ key: 'amqp-one', payload: { order: 7 }, fireAt: put.body.fireAt, firedAt: expect.any(String), attempt: 1 });
    expect(Date.parse(got.body.firedAt)).toBeGreaterThanOrEqual(fireAt);
    expect(got.at).toBeGreaterThanOrEqual(fireAt);
    expect(got.msg.properties.messageId).toBe((await rowIds('amqp-one')).get('amqp-one'));
    expect(got.msg.properties.deliveryMode).toBe(2);
    expect(got.msg.properties.contentType).toBe('application/json');
    expect(got.msg.properties.headers?.['x-client']).toBe('default');
  });

  it('delivers every timer when the broker connection is cut and refused while they fire; a repeat carries the same message-id', async () => {
    const fireAts = await storm('amqp-storm-', amqpTarget('storm'));
    // The outage starts once the first timers went through (the service holds its connection).
    expect(await waitFor(() => received.storm.length >= 10, SETTLE_MS)).toBe(true);
    expect(await outage(amqpProxy)).toBeGreaterThanOrEqual(1);
    const timers = await waitDelivered('amqp-storm-', STORM);
    // Some timers came due while the broker was away: the outage was met, not missed.
    expect(timers.some((t) => t.attempts > 1)).toBe(true);
    const ids = await rowIds('amqp-storm-');
    expect(await waitFor(() => new Set(received.storm.map((g) => g.body.key)).size === STORM, SETTLE_MS)).toBe(true);
    for (const g of received.storm) {
      expect(g.msg.properties.messageId).toBe(ids.get(g.body.key));
      expect(g.at).toBeGreaterThanOrEqual(fireAts.get(g.body.key) as number);
    }
    expect(new Set(received.storm.map((g) => g.msg.properties.messageId as string)).size).toBe(STORM);
  });
});

describe('timers delivered to NATS JetStream', () => {
  it('publishes {key, payload, fireAt, firedAt, attempt} with the firing as Nats-Msg-Id, no earlier than fireAt; DELIVERED, attempts 1', async () => {
    const subject = natsTarget('one').subject;
    const put = await svc
      .api()
      .put('/timers/nats-one')
      .send({ delayMs: 300, target: natsTarget('one'), payload: { order: 8 } });
    expect(put.status).toBe(201);
    const fireAt = Date.parse(put.body.fireAt);
    const [t] = await waitDelivered('nats-one', 1);
    expect(t).toMatchObject({ attempts: 1 });
    expect(Date.parse(t?.deliveredAt as string)).toBeGreaterThanOrEqual(fireAt);
    const msgs = await streamMessages(subject);
    expect(msgs).toHaveLength(1);
    const m = msgs[0] as StoredMsg;
    const body = m.json<TimerBody>();
    expect(body).toEqual({ key: 'nats-one', payload: { order: 8 }, fireAt: put.body.fireAt, firedAt: expect.any(String), attempt: 1 });
    expect(Date.parse(body.firedAt)).toBeGreaterThanOrEqual(fireAt);
    // When the stream stored it (the server's clock, this machine's).
    expect(m.time.getTime()).toBeGreaterThanOrEqual(fireAt);
    expect(m.header.get('Nats-Msg-Id')).toBe((await rowIds('nats-one')).get('nats-one'));
  });

  it('delivers every timer when the server connection is cut and refused while they fire; the stream holds exactly one message per id', async () => {
    const subject = natsTarget('storm').subject;
    const stored = async () => (await jsm.streams.info(stream, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;
    const fireAts = await storm('nats-storm-', natsTarget('storm'));
    expect(await waitFor(async () => (await stored()) >= 10, SETTLE_MS, 50)).toBe(true);
    expect(await outage(natsProxy)).toBeGreaterThanOrEqual(1);
    await waitDelivered('nats-storm-', STORM);
    // The outage was met: the service's connection was cut and made again. (The
    // client holds publishes while it reconnects, so a timer that came due
    // meanwhile may still go through on its first attempt.)
    expect(natsProxy.stats().accepted).toBeGreaterThanOrEqual(2);
    const ids = await rowIds('nats-storm-');
    const msgs = await streamMessages(subject);
    expect(msgs).toHaveLength(STORM);
    const keys = new Set<string>();
    for (const m of msgs) {
      const body = m.json<TimerBody>();
      keys.add(body.key);
      expect(m.header.get('Nats-Msg-Id')).toBe(ids.get(body.key));
      expect(m.time.getTime()).toBeGreaterThanOrEqual(fireAts.get(body.key) as number);
    }
    expect(keys.size).toBe(STORM);
  });
});
