// Redis connections: one server (REDIS_URL, a database index in its path
// honoured), a master found through Redis Sentinel (REDIS_SENTINELS) or a
// Redis Cluster (REDIS_CLUSTER_NODES). Each connection is named so operators
// (and tests) can find it in CLIENT LIST.
//
// Every connection fails fast once it has been up: a command sent while it is
// down is refused at once instead of waiting in a queue for the return (where
// it piled up for the whole outage and ran late, long after its caller gave
// up), and a command that gets no answer within REDIS_SOCKET_TIMEOUT_MS ends
// the connection (a hung server, or a socket that went silent without a reset),
// failing what waited on it and opening a new one. Nothing is resent after a
// reconnect: the callers (worker loops, ack batches, best-effort schedules
// backed by the reconciliation passes) retry on their own, with fresh values.
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { isCluster, masters, subscriberOf, type RedisClient } from '../queue/index.js';
import type { Config } from '../config.js';
import type { Logger } from './logger.js';

export { type RedisClient, isCluster, masters, subscriberOf };

export type RedisTarget = {
  readonly url: string;
  /** Seed nodes of a cluster; when given, the URL only lends credentials and TLS. */
  readonly clusterNodes?: readonly { host: string; port: number }[] | undefined;
  /** Sentinels watching the master named `sentinelName`; when given, the URL only lends credentials, database and TLS. */
  readonly sentinels?: readonly { host: string; port: number }[] | undefined;
  readonly sentinelName?: string | undefined;
  /** A command unanswered this long (ms) ends its connection. Default DEFAULT_SOCKET_TIMEOUT_MS. */
  readonly socketTimeoutMs?: number | undefined;
};

export const DEFAULT_SOCKET_TIMEOUT_MS = 3_000;

/** Where the configuration says Redis is. */
export function redisTargetOf(
  c: Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME' | 'REDIS_SOCKET_TIMEOUT_MS'>,
): RedisTarget {
  return {
    url: c.REDIS_URL,
    clusterNodes: c.REDIS_CLUSTER_NODES,
    sentinels: c.REDIS_SENTINELS,
    sentinelName: c.REDIS_SENTINEL_NAME,
    socketTimeoutMs: c.REDIS_SOCKET_TIMEOUT_MS,
  };
}

/** Reconnect backoff: 100 ms doubling to 2 s. */
const retryStrategy = (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2_000);

function nodeOptions(connectionName: string, socketTimeoutMs: number): RedisOptions {
  return {
    connectionName,
    // Reject whatever waited on a connection as soon as it closes (0 retries per
    // request), and never resend it on the next connection: a command that may
    // already have run must not run twice, and one that did not is the caller's
    // to retry.
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    // A command without an answer this long means a hung server or a dead
    // path: the connection is ended and opened again.
    socketTimeout: socketTimeoutMs,
    // TCP keep-alive probes so a silently dead peer is noticed by the OS too.
    keepAlive: 10_000,
    retryStrategy,
    // A master demoted by a failover answers writes with READONLY: find the new one.
    reconnectOnError: (err) => err.message.startsWith('READONLY'),
  };
}

/**
 * Opens a named connection. Commands given before it first becomes ready wait
 * for it unless that first attempt fails (start-up awaits whenReady first);
 * after that, a command given while it is down fails at once (see the file header).
 */
export function createRedis(
  target: RedisTarget | string,
  connectionName: string,
  opts: { lazyConnect?: boolean; log?: Pick<Logger, 'warn' | 'info'> } = {},
): RedisClient {
  const t = typeof target === 'string' ? { url: target } : target;
  const client = open(t, connectionName, opts.lazyConnect ?? false);
  // Without a listener ioredis prints every failed reconnect to stderr; one
  // line per outage in the log says it, and the commands that fail say the rest.
  let down = false;
  client.on('error', (err: Error) => {
    if (down) return;
    down = true;
    opts.log?.warn({ err, connection: connectionName }, 'redis connection lost; reconnecting');
  });
  client.on('ready', () => {
    if (down) opts.log?.info({ connection: connectionName }, 'redis connection back');
    down = false;
    client.options.enableOfflineQueue = false;
  });
  return client;
}

/** Ends a connection: QUIT when it is up (pending replies are read first), else just closes it. */
export async function closeRedis(redis: RedisClient): Promise<void> {
  try {
    await redis.quit();
  } catch {
    // Down (a quit cannot be sent while it fails fast): close it, so it stops reconnecting.
    redis.disconnect();
  }
}

/** Resolves once the connection is ready, or rejects after `ms`. */
export async function whenReady(redis: RedisClient, ms: number): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new Error(`redis not ready within ${ms} ms (status ${redis.status})`));
    }, ms);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', onReady);
  });
}

function open(t: RedisTarget, connectionName: string, lazyConnect: boolean): RedisClient {
  const node = nodeOptions(connectionName, t.socketTimeoutMs ?? DEFAULT_SOCKET_TIMEOUT_MS);
  if (t.sentinels?.length) {
    const u = new URL(t.url);
    const db = Number(u.pathname.slice(1) || 0);
    const name = t.sentinelName ?? 'mymaster';
    const client = new Redis({
      ...node,
      lazyConnect,
      sentinels: [...t.sentinels],
      name,
      // Not ioredis' failoverDetector: it drops the connection on every
      // +switch-master, whichever master it names (followSwitch below).
      sentinelRetryStrategy: retryStrategy,
      ...(u.username && { username: decodeURIComponent(u.username) }),
      ...(u.password && { password: decodeURIComponent(u.password) }),
      ...(Number.isInteger(db) && db > 0 && { db }),
      ...(u.protocol === 'rediss:' && { tls: {}, enableTLSForSentinelMode: true }),
    });
    followSwitch(client, t.sentinels, name);
    return client;
  }
  if (!t.clusterNodes?.length) return new Redis(t.url, { ...node, lazyConnect });
  const u = new URL(t.url);
  return new Cluster([...t.clusterNodes], {
    redisOptions: {
      ...node,
      ...(u.username && { username: decodeURIComponent(u.username) }),
      ...(u.password && { password: decodeURIComponent(u.password) }),
      ...(u.protocol === 'rediss:' && { tls: {} }),
    },
    clusterRetryStrategy: retryStrategy,
    lazyConnect,
    // Every command goes to the master of its slot: a replica may lag behind a claim.
    scaleReads: 'master',
    // A slot moving between masters answers TRYAGAIN for a multi-key script
    // until all its keys have moved (for the queue scripts, which declare an
    // absent key, until the whole slot has moved: lua/README.md): retry
    // shortly instead of failing. Each retry counts as a redirection; the
    // default 16 gives up within a second, 200 after about 10 s.
    retryDelayOnTryAgain: 50,
    maxRedirections: 200,
    retryDelayOnClusterDown: 200,
    // A command whose node connection closed is failed, not sent again (what
    // may have run must not run twice, nor after later commands): as for one server.
    retryDelayOnFailover: 0,
  });
}

/**
 * Moves `client` to the new master as soon as a sentinel announces that its
 * master switched: a master demoted by SENTINEL FAILOVER stays writable until
 * the sentinels reconfigure it (about 10 s later) and what is written to it
 * meanwhile is lost, so waiting for READONLY is not enough. Only +switch-master
 * messages naming this master count: ioredis' own failoverDetector reconnects
 * on any of them, so every failover of another master watched by the same
 * sentinels would cut every connection of the service.
 */
function followSwitch(client: Redis, sentinels: readonly { host: string; port: number }[], name: string): void {
  const watchers = sentinels.map(({ host, port }) => {
    // Subscribed again on every reconnect by us, its failure handled: ioredis'
    // own re-subscription leaves its promise unhandled, and a sentinel that
    // drops the connection again before answering would end the process.
    const w = new Redis({
      host,
      port,
      lazyConnect: true,
      connectionName: `${client.options.connectionName ?? 'ots'}-switch`,
      retryStrategy,
      autoResubscribe: false,
    });
    w.on('error', () => {}); // a sentinel down: the others still announce the switch
    w.on('ready', () => void w.subscribe('+switch-master').catch(() => {}));
    w.on('message', (_channel: string, message: string) => {
      // "<name> <old-ip> <old-port> <new-ip> <new-port>"
      const [master, , , ip, newPort] = message.split(' ');
      if (master !== name || client.status !== 'ready') return;
      const s = client.stream;
      if (s.remoteAddress === ip && s.remotePort === Number(newPort)) return; // already there
      client.disconnect(true);
    });
    return w;
  });
  // Pub/Sub connections are duplicates of a client (subscriberOf): they follow too.
  const duplicate = client.duplicate.bind(client);
  client.duplicate = (override) => {
    const d = duplicate(override);
    followSwitch(d, sentinels, name);
    return d;
  };
  // Watch from the first connect (a lazy connection that is never used opens
  // none); each watcher subscribes when it is ready, again after every reconnect.
  client.once('connect', () => {
    for (const w of watchers) void w.connect().catch(() => {});
  });
  client.once('end', () => {
    for (const w of watchers) w.disconnect();
  });
}
