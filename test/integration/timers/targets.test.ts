// The AMQP and NATS JetStream timer targets against the real brokers on this
// machine (RabbitMQ :5672, NATS :4222): a send resolves only once the broker
// holds the message, with the message id as its dedupe id; a target the broker
// cannot take (unroutable, no exchange, no stream) fails retryably, and a
// missing exchange fails only its own send, not the others in flight; a lost
// connection is opened again; a silent one ends the send by its timeout.
import { randomUUID } from 'node:crypto';
import { connect as amqpConnect, type Channel, type ChannelModel, type GetMessage } from 'amqplib';
import { AckPolicy, connect as natsConnect, nanos, StorageType, type JetStreamManager, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/core/logger.js';
import { createAmqpSender } from '../../../src/modules/timers/targets/amqp.js';
import type { AmqpTarget, NatsTarget, TargetSender, TimerMessage } from '../../../src/modules/timers/targets/contract.js';
import { createNatsSender } from '../../../src/modules/timers/targets/nats.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
const TIMEOUT_MS = 5_000;
/** A send's timeout where the test waits for it to pass. */
const SHORT_TIMEOUT_MS = 500;
const log = createLogger('silent');
const run = randomUUID().slice(0, 8);
const never = () => new AbortController().signal;

function buildMessage(overrides: Partial<TimerMessage> = {}): TimerMessage {
  const id = overrides.id ?? randomUUID();
  const now = new Date().toISOString();
  return { id, client: 'acme', body: JSON.stringify({ key: `k-${id}`, payload: { n: 1 }, fireAt: now, firedAt: now, attempt: 1 }), ...overrides };
}

/** Sends until one send resolves (a send on a connection just lost may fail, retryably); how many failed first. */
async function sendUntilDelivered(sender: TargetSender<AmqpTarget>, target: AmqpTarget, message: TimerMessage): Promise<number> {
  for (let failed = 0; ; failed++) {
    try {
      await sender.send(target, message, never());
      return failed;
    } catch (err) {
      if (failed >= 3) throw err;
      await sleep(50);
    }
  }
}

describe('AMQP target', () => {
  const exchange = `timers-test-${run}`;
  const queue = `${exchange}.due`;
  const bulkQueue = `${exchange}.bulk`;
  let admin: ChannelModel;
  let ch: Channel;
  let proxy: TcpProxy;
  const sender = createAmqpSender({ url: AMQP_URL, timeoutMs: TIMEOUT_MS, log });
  const to = (routingKey: string, ex = exchange): AmqpTarget => ({ type: 'amqp', exchange: ex, routingKey });

  /** The next message on `q`: a confirmed message is in its queue, the poll only rides out the other channel's lag. */
  async function nextMessage(q: string): Promise<GetMessage> {
    let got: GetMessage | false = false;
    await waitFor(async () => (got = await ch.get(q, { noAck: true })) !== false, TIMEOUT_MS);
    if (!got) throw new Error(`no message on ${q}`);
    return got;
  }

  beforeAll(async () => {
    admin = await amqpConnect(AMQP_URL);
    ch = await admin.createChannel();
    await ch.assertExchange(exchange, 'direct', { durable: false });
    await ch.assertQueue(queue, { durable: false });
    await ch.bindQueue(queue, exchange, 'due');
    await ch.assertQueue(bulkQueue, { durable: false });
    await ch.bindQueue(bulkQueue, exchange, 'bulk');
    proxy = await startTcpProxy({ port: 5672 });
  });

  afterAll(async () => {
    await sender.close();
    await proxy?.close();
    await ch?.deleteQueue(queue);
    await ch?.deleteQueue(bulkQueue);
    await ch?.deleteExchange(exchange);
    await admin?.close();
  });

  it('publishes persistent JSON with the message id, and resolves once the broker confirmed', async () => {
    const message = buildMessage();
    await sender.send(to('due'), message, never());
    const got = await nextMessage(queue);
    expect(got.content.toString()).toBe(message.body);
    expect(got.properties.messageId).toBe(message.id);
    expect(got.properties.deliveryMode).toBe(2);
    expect(got.properties.contentType).toBe('application/json');
    expect(got.properties.headers?.['x-client']).toBe('acme');
  });

  it('rejects a message no queue is bound for, naming exchange and routing key', async () => {
    await expect(sender.send(to('nowhere'), buildMessage(), never())).rejects.toThrow(`exchange '${exchange}' routes routing key 'nowhere' to no queue`);
    // The channel is still good.
    await sender.send(to('due'), buildMessage(), never());
    await nextMessage(queue);
  });

  it('rejects a send to an exchange that does not exist, then opens a fresh channel for the next', async () => {
    const missing = `${exchange}-missing`;
    await expect(sender.send(to('due', missing), buildMessage(), never())).rejects.toThrow(`AMQP exchange '${missing}' does not exist`);
    const message = buildMessage();
    await sender.send(to('due'), message, never());
    expect((await nextMessage(queue)).properties.messageId).toBe(message.id);
  });

  it('confirms 200 concurrent sends on its one channel', async () => {
    const messages = Array.from({ length: 200 }, () => buildMessage());
    await Promise.all(messages.map((m) => sender.send(to('bulk'), m, never())));
    expect((await ch.checkQueue(bulkQueue)).messageCount).toBe(200);
    await ch.purgeQueue(bulkQueue);
  });

  /** 200 concurrent sends to 'bulk', the one at `badAt` to an exchange that does not exist: how each ended. */
  async function burstWithOneMissing(s: TargetSender<AmqpTarget>, badAt: number, missing: string) {
    const sends = Array.from({ length: 200 }, (_, i) => s.send(i === badAt ? to('bulk', missing) : to('bulk'), buildMessage(), never()));
    const results = await Promise.allSettled(sends);
    return { bad: results[badAt], goodFailed: results.filter((r, i) => i !== badAt && r.status === 'rejected') };
  }

  it.each([
    ['an open channel, the missing exchange among the others', 20],
    ['a fresh sender, the missing exchange checked first', 0],
  ])('confirms the other sends in flight when one goes to an exchange that does not exist (%s)', async (_, badAt) => {
    const fresh = createAmqpSender({ url: AMQP_URL, timeoutMs: TIMEOUT_MS, log });
    const missing = `${exchange}-gone`;
    try {
      if (badAt > 0) {
        await fresh.send(to('due'), buildMessage(), never());
        await nextMessage(queue);
      }
      const { bad, goodFailed } = await burstWithOneMissing(fresh, badAt, missing);
      expect(goodFailed).toEqual([]);
      expect(bad).toMatchObject({ status: 'rejected', reason: { message: expect.stringContaining(`AMQP exchange '${missing}' does not exist`) } });
      expect((await ch.checkQueue(bulkQueue)).messageCount).toBe(199);
    } finally {
      await ch.purgeQueue(bulkQueue);
      await fresh.close();
    }
  });

  it('checks an exchange deleted after it was used again, and sends to it once it is declared again', async () => {
    const later = `${exchange}-later`;
    const laterQueue = `${later}.q`;
    const declare = async () => {
      await ch.assertExchange(later, 'direct', { durable: false });
      await ch.bindQueue(laterQueue, later, 'due');
    };
    await ch.assertQueue(laterQueue, { durable: false });
    try {
      await declare();
      await sender.send(to('due', later), buildMessage(), never());
      await nextMessage(laterQueue);
      await ch.deleteExchange(later);
      // The first send after the delete learns it from its publish (the channel closes under it);
      // the sends after it are checked first again, so they no longer close the channel under others.
      await expect(sender.send(to('due', later), buildMessage(), never())).rejects.toThrow(`AMQP exchange '${later}' does not exist`);
      const { bad, goodFailed } = await burstWithOneMissing(sender, 20, later);
      expect(goodFailed).toEqual([]);
      expect(bad).toMatchObject({ status: 'rejected', reason: { message: expect.stringContaining(`AMQP exchange '${later}' does not exist`) } });
      expect((await ch.checkQueue(bulkQueue)).messageCount).toBe(199);
      await declare();
      const message = buildMessage();
      await sender.send(to('due', later), message, never());
      expect((await nextMessage(laterQueue)).properties.messageId).toBe(message.id);
    } finally {
      await ch.purgeQueue(bulkQueue);
      await ch.deleteQueue(laterQueue);
      await ch.deleteExchange(later);
    }
  });

  it('opens one connection for concurrent first sends, and connects again after it was reset', async () => {
    const viaProxy = createAmqpSender({ url: `amqp://guest:guest@127.0.0.1:${proxy.port}`, timeoutMs: TIMEOUT_MS, log });
    const burst = (n: number) => Promise.all(Array.from({ length: n }, () => viaProxy.send(to('bulk'), buildMessage(), never())));
    try {
      await burst(50);
      expect(proxy.stats().accepted).toBe(1);
      expect(proxy.dropAll()).toBe(1);
      const message = buildMessage();
      expect(await sendUntilDelivered(viaProxy, to('due'), message)).toBeLessThanOrEqual(1);
      await burst(50);
      expect(proxy.stats().accepted).toBe(2);
      expect((await nextMessage(queue)).properties.messageId).toBe(message.id);
      expect((await ch.checkQueue(bulkQueue)).messageCount).toBe(100);
      await ch.purgeQueue(bulkQueue);
    } finally {
      await viaProxy.close();
    }
  });

  it('ends a send by its timeout or its signal when the broker goes silent, and still closes', async () => {
    const viaProxy = createAmqpSender({ url: `amqp://guest:guest@127.0.0.1:${proxy.port}`, timeoutMs: SHORT_TIMEOUT_MS, log });
    try {
      await viaProxy.send(to('due'), buildMessage(), never());
      await nextMessage(queue);
      expect(proxy.silence()).toBe(1);
      await expect(viaProxy.send(to('due'), buildMessage(), never())).rejects.toThrow(`did not confirm within ${SHORT_TIMEOUT_MS} ms`);
      const abort = new AbortController();
      const sending = viaProxy.send(to('due'), buildMessage(), abort.signal);
      abort.abort(new Error('shutting down'));
      await expect(sending).rejects.toThrow('shutting down');
      await expect(viaProxy.send(to('due'), buildMessage(), abort.signal)).rejects.toThrow('shutting down');
    } finally {
      await viaProxy.close();
    }
    await expect(viaProxy.send(to('due'), buildMessage(), never())).rejects.toThrow('closed');
  });
});

describe('NATS JetStream target', () => {
  const stream = `TIMERS_TEST_${run}`;
  const prefix = `timers-test.${run}`;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let proxy: TcpProxy;
  const sender = createNatsSender({ url: NATS_URL, timeoutMs: TIMEOUT_MS, log });
  const to = (subject: string): NatsTarget => ({ type: 'nats', subject });
  const count = async (subject: string) => (await jsm.streams.info(stream, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;

  beforeAll(async () => {
    nc = await natsConnect({ servers: NATS_URL });
    jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`], storage: StorageType.Memory, duplicate_window: nanos(60_000) });
    proxy = await startTcpProxy({ port: 4222 });
  });

  afterAll(async () => {
    await sender.close();
    await proxy?.close();
    await jsm?.streams.delete(stream);
    await nc?.close();
  });

  it('stores a message once when it is sent twice with one id, and resolves both sends', async () => {
    const subject = `${prefix}.twice`;
    const message = buildMessage();
    await sender.send(to(subject), message, never());
    await sender.send(to(subject), message, never());
    expect(await count(subject)).toBe(1);
  });

  it('hands the body and the message id to a consumer', async () => {
    const subject = `${prefix}.read`;
    const message = buildMessage();
    await sender.send(to(subject), message, never());
    // A named consumer with one filter subject: the ordered consumer's filterSubjects needs nats-server 2.10.
    const { name } = await jsm.consumers.add(stream, { filter_subject: subject, ack_policy: AckPolicy.None });
    const consumer = await nc.jetstream().consumers.get(stream, name);
    const got = await consumer.next({ expires: TIMEOUT_MS });
    expect(got?.string()).toBe(message.body);
    expect(got?.headers?.get('Nats-Msg-Id')).toBe(message.id);
  });

  it('rejects a subject no stream captures', async () => {
    const subject = `timers-none.${run}.x`;
    await expect(sender.send(to(subject), buildMessage(), never())).rejects.toThrow(`no NATS JetStream stream captures subject '${subject}'`);
  });

  it('carries on after its connection was reset', async () => {
    const viaProxy = createNatsSender({ url: `nats://127.0.0.1:${proxy.port}`, timeoutMs: TIMEOUT_MS, log });
    const subject = `${prefix}.reset`;
    try {
      await viaProxy.send(to(subject), buildMessage(), never());
      expect(proxy.dropAll()).toBe(1);
      // The client reconnects on its own; a send before it may be lost with the old socket and end by its timeout.
      expect(await waitFor(() => proxy.stats().accepted === 2, TIMEOUT_MS)).toBe(true);
      await viaProxy.send(to(subject), buildMessage(), never());
      expect(await count(subject)).toBe(2);
    } finally {
      await viaProxy.close();
    }
  });

  it('ends a send by its timeout or its signal when the server goes silent, and still closes', async () => {
    const viaProxy = createNatsSender({ url: `nats://127.0.0.1:${proxy.port}`, timeoutMs: SHORT_TIMEOUT_MS, log });
    const subject = `${prefix}.silent`;
    try {
      await viaProxy.send(to(subject), buildMessage(), never());
      expect(proxy.silence()).toBe(1);
      await expect(viaProxy.send(to(subject), buildMessage(), never())).rejects.toThrow(`subject '${subject}'`);
      const abort = new AbortController();
      const sending = viaProxy.send(to(subject), buildMessage(), abort.signal);
      abort.abort(new Error('shutting down'));
      await expect(sending).rejects.toThrow('shutting down');
    } finally {
      await viaProxy.close();
    }
    await expect(viaProxy.send(to(subject), buildMessage(), never())).rejects.toThrow('closed');
  });
});
