// Listens on the wake channels of a queue's shards (a new head of the due set,
// announced with its due time) and forwards them to the shard pollers. A ping
// every idle period guards against a connection that died without closing: no
// answer in time and the connection is dropped and re-opened, and every
// poller re-checks because announcements may have been missed meanwhile.
import { withTimeout } from '../timeout.js';
import { type RedisClient, subscriberOf } from '../redis-client.js';
import type { QueueLogger } from '../types.js';

export type WakeSubscriber = { stop(): Promise<void> };
/** A subscriber that can take more channels while it runs (shards a change of the shard count adds). */
export type WakeListener = WakeSubscriber & { add(target: WakeTarget): Promise<void> };

const UNSUBSCRIBE_TIMEOUT_MS = 1_000;
/** How long start-up keeps trying to subscribe through a Redis blip. */
const SUBSCRIBE_FOR_MS = 30_000;
const SUBSCRIBE_RETRY_MS = 250;

export async function startWakeSubscriber(opts: {
  readonly subscriber: RedisClient;
  /** channel -> callback with the announced due time (ms since epoch, Redis clock); add() puts more in */
  readonly channels: Map<string, (dueAt: number) => void>;
  readonly onReconnect: () => void;
  readonly pingEveryMs: number;
  readonly pingTimeoutMs: number;
  readonly log: QueueLogger;
}): Promise<WakeSubscriber & { add(channel: string, cb: (dueAt: number) => void): Promise<void> }> {
  const { subscriber: sub, channels, log } = opts;
  const onMessage = (channel: string, message: string) => {
    const cb = channels.get(channel);
    const dueAt = Number(message);
    if (cb && Number.isFinite(dueAt)) cb(dueAt);
  };
  let connectedOnce = false;
  // Said once per outage (ioredis would print every failed reconnect to stderr).
  let down = false;
  const onError = (err: Error) => {
    if (!down) log.warn({ err }, 'wake subscriber connection lost; reconnecting');
    down = true;
  };
  const onReady = () => {
    down = false;
    if (!connectedOnce) return; // the first subscribe is start-up's (below)
    // Subscribed again here, its failure handled (see subscriberOf): a
    // connection that drops before the answer is opened and tried again.
    // What was published while we were away is lost: every shard re-checks,
    // once subscribed, so nothing announced after the re-check is missed.
    sub.subscribe(...channels.keys()).then(
      () => {
        log.info({}, 'wake subscriber reconnected; re-checking all shards');
        opts.onReconnect();
      },
      (err: unknown) => {
        log.warn({ err }, 'wake subscriber could not subscribe again; reconnecting');
        if (sub.status === 'ready') sub.disconnect(true);
      },
    );
  };
  sub.on('message', onMessage);
  sub.on('ready', onReady);
  sub.on('error', onError);
  // A subscribe cut off by a dropped connection (a hung Redis at start-up) is
  // tried again: a worker must not die because Redis blinked while it started.
  for (const started = Date.now(); ;) {
    try {
      await sub.subscribe(...channels.keys());
      break;
    } catch (err) {
      if (Date.now() - started > SUBSCRIBE_FOR_MS) throw err;
      log.warn({ err }, 'wake subscriber could not subscribe yet; retrying');
      await new Promise((r) => setTimeout(r, SUBSCRIBE_RETRY_MS));
    }
  }
  connectedOnce = true;

  let pinging = false;
  const pinger = setInterval(() => {
    if (pinging || sub.status !== 'ready') return;
    pinging = true;
    withTimeout(sub.ping(), opts.pingTimeoutMs, 'wake subscriber ping')
      .catch((err: unknown) => {
        log.warn({ err }, 'wake subscriber did not answer a ping; reconnecting');
        sub.disconnect(true);
      })
      .finally(() => {
        pinging = false;
      });
  }, opts.pingEveryMs);
  pinger.unref();

  return {
    async add(channel, cb) {
      // In the map first: a reconnect meanwhile subscribes it with the rest.
      channels.set(channel, cb);
      await sub.subscribe(channel);
    },
    async stop() {
      clearInterval(pinger);
      sub.off('message', onMessage);
      sub.off('ready', onReady);
      sub.off('error', onError);
      try {
        // Bounded: on a connection already closed (a cluster client queues the
        // command until a reconnect that never comes) stop must not hang.
        await withTimeout(sub.unsubscribe(...channels.keys()), UNSUBSCRIBE_TIMEOUT_MS, 'unsubscribe');
      } catch {
        // Closing anyway: a failed unsubscribe on a broken connection changes nothing.
      }
    },
  };
}

/** One shard's loop, as the wake-ups reach it. */
export type WakeTarget = {
  readonly channel: string;
  /** Run at this time on the Redis clock (the announced due time or deadline). */
  wakeAt(serverMs: number): void;
  wakeNow(): void;
};

/**
 * Wakes each shard's loop from its channel, on a Pub/Sub connection of its
 * own (a duplicate of `redis` unless one is given), pinged every idle period;
 * after a reconnect every loop runs at once (announcements may have been
 * missed). The one way the worker and the batch flusher listen.
 */
export async function listenForWakeUps(o: {
  readonly redis: RedisClient;
  readonly subscriber?: RedisClient;
  readonly targets: readonly WakeTarget[];
  readonly idleRecheckMs: number;
  readonly log: QueueLogger;
  /** After the loops are woken on a reconnect: what else an announcement missed meanwhile needs (a pause's hand-back). */
  readonly onReconnect?: () => void;
}): Promise<WakeListener> {
  const subscriber = o.subscriber ?? subscriberOf(o.redis);
  const close = () => {
    if (subscriber !== o.subscriber) subscriber.disconnect();
  };
  const targets = [...o.targets];
  let wake: Awaited<ReturnType<typeof startWakeSubscriber>>;
  try {
    wake = await startWakeSubscriber({
      subscriber,
      channels: new Map(o.targets.map((t) => [t.channel, (at: number) => t.wakeAt(at)])),
      onReconnect: () => {
        targets.forEach((t) => t.wakeNow());
        o.onReconnect?.();
      },
      pingEveryMs: o.idleRecheckMs,
      pingTimeoutMs: Math.max(o.idleRecheckMs, 2_000),
      log: o.log,
    });
  } catch (err) {
    close();
    throw err;
  }
  o.targets.forEach((t) => t.wakeNow());
  return {
    async add(t) {
      targets.push(t);
      await wake.add(t.channel, (at: number) => t.wakeAt(at));
      t.wakeNow();
    },
    async stop() {
      await wake.stop();
      close();
    },
  };
}
