// The load drivers' HTTP client. It behaves like a careful real client: on a
// 503 or a broken connection it waits and sends the same request again (same
// Idempotency-Key), for a bounded time. It tallies every answer, so a scenario
// can check what the clients saw: 503s with a problem+json body and a stable
// code while PostgreSQL is away, never a 500.
import { sleep } from '../../helpers/redis.js';

export type Reply = {
  status: number;
  body: Record<string, unknown>;
  /** Attempts it took (1 = answered at the first try). */
  attempts: number;
  /** Local time the first attempt was sent (ms since epoch). */
  firstSentAt: number;
  /** Local time the answer arrived (ms since epoch). */
  receivedAt: number;
};

export type HttpTally = {
  /** Every answer by status, retried attempts included. */
  statuses: Record<number, number>;
  /** 503 answers by their problem `code` (or "not problem+json"). */
  unavailable: Record<string, number>;
  networkErrors: number;
  /** 5xx other than 503: each one is a bug. */
  serverErrors: string[];
};

export type Http = {
  send(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply>;
  readonly tally: HttpTally;
};

const ATTEMPT_TIMEOUT_MS = 10_000;
const RETRY_PAUSE_MS = [150, 350] as const;

/** `key`: the API key sent with every request (`Authorization: Bearer`). */
export function createHttp(baseUrl: string, key: string, retryForMs = 30_000): Http {
  const tally: HttpTally = { statuses: {}, unavailable: {}, networkErrors: 0, serverErrors: [] };

  async function attempt(method: string, path: string, body: unknown, headers: Record<string, string>) {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
    });
    const text = await res.text();
    const json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    tally.statuses[res.status] = (tally.statuses[res.status] ?? 0) + 1;
    return { status: res.status, body: json, problem: (res.headers.get('content-type') ?? '').startsWith('application/problem+json') };
  }

  return {
    tally,
    async send(method, path, body, headers = {}) {
      const firstSentAt = Date.now();
      for (let attempts = 1; ; attempts++) {
        try {
          const r = await attempt(method, path, body, headers);
          if (r.status !== 503) {
            if (r.status >= 500) tally.serverErrors.push(`${method} ${path}: ${r.status} ${String(r.body.code)}`);
            return { status: r.status, body: r.body, attempts, firstSentAt, receivedAt: Date.now() };
          }
          const code = r.problem ? String(r.body.code) : 'not problem+json';
          tally.unavailable[code] = (tally.unavailable[code] ?? 0) + 1;
        } catch {
          tally.networkErrors++;
        }
        if (Date.now() - firstSentAt > retryForMs)
          throw new Error(
            `${method} ${path}: no answer but 503s and errors for ${retryForMs} ms (so far: 503 by code ${JSON.stringify(tally.unavailable)}, ${tally.networkErrors} network errors)`,
          );
        await sleep(RETRY_PAUSE_MS[0] + Math.random() * (RETRY_PAUSE_MS[1] - RETRY_PAUSE_MS[0]));
      }
    },
  };
}

/** Uniform random number in [lo, hi). */
export const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

/** Sleeps until local time `at` (ms since epoch); at once if it has passed. */
export const sleepUntil = (at: number) => sleep(Math.max(0, at - Date.now()));
