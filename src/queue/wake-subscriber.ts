// Listens on the wake channels of a queue's shards (a new head of the due set,
// announced with its due time) and forwards them to the shard pollers. A ping
// every idle period guards against a connection that died without closing: no
// answer in time and the connection is dropped and re-opened, and every
// poller re-checks because announcements may have been missed meanwhile.
import { withTimeout } from '../core/timeout.js';
import type { RedisClient } from './scripts.js';
import type { QueueLogger } from './types.js';

export type WakeSubscriber = { stop(): Promise<void> };

const UNSUBSCRIBE_TIMEOUT_MS = 1_000;

export async function startWakeSubscriber(opts: {
  readonly subscriber: RedisClient;
  /** channel -> callback with the announced due time (ms since epoch, Redis clock) */
  readonly channels: ReadonlyMap<string, (dueAt: number) => void>;
  readonly onReconnect: () => void;
  readonly pingEveryMs: number;
  readonly pingTimeoutMs: number;
  readonly log: QueueLogger;
}): Promise<WakeSubscriber> {
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
    // ioredis re-subscribes by itself; what was published while we were away is lost.
    if (connectedOnce) {
      log.info({}, 'wake subscriber reconnected; re-checking all shards');
      opts.onReconnect();
    }
    connectedOnce = true;
  };
  sub.on('message', onMessage);
  sub.on('ready', onReady);
  sub.on('error', onError);
  await sub.subscribe(...channels.keys());
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
