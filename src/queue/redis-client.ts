// The connection the engine runs on: one Redis server or a Redis Cluster. Every
// script touches one slot (keys.ts), so both take the same calls; only per-node
// commands (CONFIG, SCAN) need to know which it is.
import { Cluster, type Redis } from 'ioredis';

export type RedisClient = Redis | Cluster;

export function isCluster(redis: RedisClient): redis is Cluster {
  return redis instanceof Cluster;
}

/** One connection per master: the single server, or every master of the cluster. */
export function masters(redis: RedisClient): Redis[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}

/**
 * A Pub/Sub connection beside `redis`: it waits through reconnects. Its owner
 * subscribes again on every 'ready' (startWakeSubscriber does): ioredis' own
 * re-subscription is off, as it leaves its SUBSCRIBE's promise unhandled, and
 * a connection that drops again before the answer (Redis restarting) rejected
 * it and ended the process (both workers died on one Redis restart). A cluster client re-subscribes
 * through its own subscriber node, handling the answer.
 */
export function subscriberOf(redis: RedisClient): RedisClient {
  return isCluster(redis) ? redis.duplicate() : redis.duplicate({ enableOfflineQueue: true, autoResubscribe: false });
}
