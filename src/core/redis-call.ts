// Redis calls made while an HTTP request or a handler waits: bounded in time,
// so a hung or unreachable Redis costs a request at most REDIS_CALL_TIMEOUT_MS,
// and told apart from bugs, so the error funnel answers 503, not 500. The
// best-effort kind follows a PostgreSQL commit: the truth is already stored,
// and a reconciliation pass (or relay) repairs what the call did not do.
// The bound is Redis' lateness, not the service's: a reply that arrived while
// the event loop was busy is read before the bound is judged.
import type { Logger } from './logger.js';

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

/**
 * Waits for a Redis call (given as soon as it is sent, so the bound counts
 * from the write) up to `ms`; no answer by then, or a connection failure,
 * becomes a RedisUnavailableError.
 */
export async function redisCall<T>(call: Promise<T>, what: string, ms = REDIS_CALL_TIMEOUT_MS): Promise<T> {
  try {
    return await replyWithin(call, ms, what);
  } catch (err) {
    if (err instanceof RedisUnavailableError) throw err;
    if (isRedisUnavailable(err)) throw new RedisUnavailableError(`${what}: ${(err as Error).message}`, { cause: err });
    throw err;
  }
}

/**
 * `call`, or a RedisUnavailableError once `ms` have passed without its answer.
 * After a busy stretch of the event loop the expired timer runs before the
 * sockets are read (timers come first in a loop turn): judged then, a reply
 * that came back in 1 ms would count as late, and a limit that admits on a
 * late reply would admit everything exactly when the service is overloaded.
 * So the verdict waits for setImmediate, which runs after that turn's reads.
 */
function replyWithin<T>(call: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (done) return;
          done = true;
          reject(new RedisUnavailableError(`${what}: no answer within ${ms} ms of the call`));
        }),
      ms,
    );
    call.then(
      (v) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        reject(err);
      },
    );
  });
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
