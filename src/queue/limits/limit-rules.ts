// The queue limiter's rules: "<scope>=<count>/<interval>", where the scope is
// a queue ("notifications"), a job type of a queue
// ("notifications:notification.deliver") or a delivery endpoint
// ("endpoint:webhook:api.example.com"). One parser for the configuration
// (QUEUE_RATE_LIMITS) and the admin API, so both refuse the same text.
import { createHash } from 'node:crypto';
import { QUEUE_NAME_PATTERN } from '../keys.js';
import { JOB_TYPE_PATTERN } from '../record.js';

/** A limit of `count` admissions per `intervalMs`. */
export type Limit = { readonly count: number; readonly intervalMs: number };
export type LimitRule = Limit & { readonly scope: string };

/**
 * An endpoint key, as a domain's `limitKey(job)` names it ("webhook:<host>",
 * "amqp:<exchange>", "nats:<subject>"): it becomes part of a Redis key, so no
 * braces (a second hash tag), spaces or control characters.
 */
export const ENDPOINT_KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:\/@*>+-]{0,199}$/;
const ENDPOINT_PREFIX = 'endpoint:';
const MAX_COUNT = 1_000_000;
const MAX_INTERVAL_MS = 24 * 3_600_000;
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** The scope of an endpoint's rule. */
export const endpointScope = (endpoint: string) => `${ENDPOINT_PREFIX}${endpoint}`;

/**
 * An endpoint key as the limiter keeps it: unchanged when it fits the
 * pattern, else (too long, odd characters) a hash of it, so a domain's key
 * can never shape a Redis key, and still limits the same endpoint.
 */
export function normaliseEndpoint(key: string): string {
  return ENDPOINT_KEY_PATTERN.test(key) ? key : `h:${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}

/** Why `scope` is not one, or null when it is. */
export function scopeProblem(scope: string): string | null {
  if (scope.startsWith(ENDPOINT_PREFIX)) {
    return ENDPOINT_KEY_PATTERN.test(scope.slice(ENDPOINT_PREFIX.length)) ? null : `an endpoint must match ${ENDPOINT_KEY_PATTERN}`;
  }
  const colon = scope.indexOf(':');
  const queue = colon < 0 ? scope : scope.slice(0, colon);
  if (!QUEUE_NAME_PATTERN.test(queue)) return `a queue name must match ${QUEUE_NAME_PATTERN}`;
  if (colon >= 0 && !JOB_TYPE_PATTERN.test(scope.slice(colon + 1))) return `a job type must match ${JOB_TYPE_PATTERN}`;
  return null;
}

/** "<count>/<interval>" (50/1s, 200/s, 1000/1m) into a limit; throws with the reason. */
export function parseLimit(text: string): Limit {
  const m = /^(\d{1,7})\/(\d{0,8})(ms|s|m|h)$/.exec(text.trim());
  if (!m) throw new Error(`"${text}" is not <count>/<interval>, e.g. 50/1s, 200/s, 1000/1m`);
  const count = Number(m[1]);
  const intervalMs = Number(m[2] === '' ? 1 : m[2]) * (UNIT_MS[m[3] as string] as number);
  return checkLimit({ count, intervalMs });
}

/** A limit within bounds: 1..1 000 000 per 1 ms..24 h, at most one admission a µs. */
export function checkLimit(l: Limit): Limit {
  if (!Number.isSafeInteger(l.count) || l.count < 1 || l.count > MAX_COUNT) throw new Error(`the count must be 1..${MAX_COUNT}`);
  if (!Number.isSafeInteger(l.intervalMs) || l.intervalMs < 1 || l.intervalMs > MAX_INTERVAL_MS) throw new Error('the interval must be 1 ms..24 h');
  if ((l.intervalMs * 1_000) / l.count < 1) throw new Error('at most one admission a microsecond');
  return l;
}

/** "scope=count/interval,..." (empty: none) into rules; throws naming the item at fault. */
export function parseRules(text: string): LimitRule[] {
  const rules = new Map<string, LimitRule>();
  for (const item of text.split(',').map((s) => s.trim())) {
    if (item === '') continue;
    const eq = item.lastIndexOf('=');
    const scope = eq < 0 ? '' : item.slice(0, eq).trim();
    const problem = eq < 0 ? 'missing "="' : scopeProblem(scope);
    if (problem) throw new Error(`${item}: ${problem}`);
    if (rules.has(scope)) throw new Error(`${scope}: given twice`);
    try {
      rules.set(scope, { scope, ...parseLimit(item.slice(eq + 1)) });
    } catch (err) {
      throw new Error(`${scope}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return [...rules.values()];
}

/** A limit as text: the run-time rules' Redis field value and the admin view. */
export const formatLimit = (l: Limit) => `${l.count}/${l.intervalMs}ms`;

/**
 * A limit in the admit script's units: µs between admissions (rounded up:
 * never more than the limit), and a burst tolerance of a tenth of the count
 * (at least one): enough that a job claimed a little after its slot does not
 * lose the slot, small enough that the burst adds a hundredth over ten intervals.
 */
export function bucketOf(scope: string, l: Limit): { scope: string; intervalUs: number; toleranceUs: number } {
  const intervalUs = Math.ceil((l.intervalMs * 1_000) / l.count);
  return { scope, intervalUs, toleranceUs: intervalUs * Math.max(1, Math.ceil(l.count / 10)) };
}
