// Redis connections: one server (REDIS_URL, a database index in its path
// honoured) or a Redis Cluster (REDIS_CLUSTER_NODES). Each connection is named
// so operators (and tests) can find it in CLIENT LIST.
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { type RedisClient, isCluster, masters } from '../queue/redis-client.js';
import type { Logger } from './logger.js';

export { type RedisClient, isCluster, masters };

export type RedisTarget = {
  readonly url: string;
  /** Seed nodes of a cluster; when given, the URL only lends credentials and TLS. */
  readonly clusterNodes?: readonly { host: string; port: number }[] | undefined;
};

/** Reconnect backoff: 100 ms doubling to 2 s. */
const retryStrategy = (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2_000);

function nodeOptions(connectionName: string): RedisOptions {
  return {
    connectionName,
    // Commands wait through a reconnect instead of failing after a few retries:
    // the worker loops and ack batches retry on their own, and the API answers 503 on errors.
    maxRetriesPerRequest: null,
    // TCP keep-alive probes so a silently dead peer is noticed by the OS.
    keepAlive: 10_000,
    retryStrategy,
  };
}

export function createRedis(
  target: RedisTarget | string,
  connectionName: string,
  opts: { lazyConnect?: boolean; log?: Pick<Logger, 'warn' | 'info'> } = {},
): RedisClient {
  const client = open(typeof target === 'string' ? { url: target } : target, connectionName, opts.lazyConnect ?? false);
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
  });
  return client;
}

function open(t: RedisTarget, connectionName: string, lazyConnect: boolean): RedisClient {
  if (!t.clusterNodes?.length) return new Redis(t.url, { ...nodeOptions(connectionName), lazyConnect });
  const u = new URL(t.url);
  return new Cluster([...t.clusterNodes], {
    redisOptions: {
      ...nodeOptions(connectionName),
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
  });
}
