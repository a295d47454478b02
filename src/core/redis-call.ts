// Redis calls made while an HTTP request or a handler waits: bounded in time,
// so a hung or unreachable Redis costs a request at most REDIS_CALL_TIMEOUT_MS,
// and told apart from bugs, so the error funnel answers 503, not 500. The
// best-effort kind follows a PostgreSQL commit: the truth is already stored,
// and a reconciliation pass (or relay) repairs what the call did not do.
import type { Logger } from './logger.js';
import { TimeoutError, withTimeout } from '../queue/index.js';

/**
 * How long a request waits for one Redis call. A request makes at most two
 * after its database work, so even a hung Redis lets it answer within about 2 s.
 */
export const REDIS_CALL_TIMEOUT_MS = 1_000;

/** Redis did not answer in time, or the connection is down: retry shortly. */
export class RedisUnavailableError extends Error {
  override readonly name = 'RedisUnavailableError';
}

// ioredis' words for a command refused or dropped because the connection is
// not there (fail-fast connections: src/core/redis.ts), or ended by the socket timeout.
const CONNECTION_ERROR =
  /Connection is closed|Stream isn't writeable|enableOfflineQueue|MaxRetriesPerRequest|Socket timeout|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|Cluster isn't ready|All sentinels are unreachable|LOADING|READONLY|MASTERDOWN/;

export function isRedisUnavailable(err: unknown): boolean {
  if (err instanceof RedisUnavailableError) return true;
  return err instanceof Error && CONNECTION_ERROR.test(`${err.name} ${err.message}`);
}

/** Runs a Redis call within `ms`; a timeout or a connection failure becomes a RedisUnavailableError. */
export async function redisCall<T>(call: Promise<T>, what: string, ms = REDIS_CALL_TIMEOUT_MS): Promise<T> {
  try {
    return await withTimeout(call, ms, what);
  } catch (err) {
    if (err instanceof TimeoutError || isRedisUnavailable(err)) throw new RedisUnavailableError(`${what}: ${(err as Error).message}`, { cause: err });
    throw err;
  }
}

/**
 * A Redis call after a commit, best effort: on any failure it logs `repair`
 * (what will make up for it) at warn and resolves undefined; never throws.
 */
export async function afterCommit<T>(
  call: () => Promise<T>,
  what: string,
  log: Pick<Logger, 'warn'>,
  context: Record<string, unknown>,
  repair: string,
): Promise<T | undefined> {
  try {
    return await redisCall(call(), what);
  } catch (err) {
    log.warn({ err, ...context }, `${what} failed; ${repair}`);
    return undefined;
  }
}
