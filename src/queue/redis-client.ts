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
