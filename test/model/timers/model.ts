// The timers model suite's model: per timer (a client's key), its firings as
// the answers made them (each firing's fire times and payloads, moves, its
// debounce burst, a cancel answered), and the reads of the database a step
// makes after an answer (which firing is the timer's current one).
import type { Reply } from '../../chaos/drivers/http.js';
import { EPS_MS, type Real, dbRead, fail } from '../runner.js';
import { MODEL_CLIENTS, MODEL_TIMERS, type ModelClient } from '../world.js';

export { EPS_MS, fail };

export const MODES = ['replace', 'keep', 'debounce'] as const;
export type Mode = (typeof MODES)[number];

/** What a PUT sends (less its target, always the world's receiver). */
export type PutInput = {
  mode: Mode;
  delayMs?: number;
  /** Absolute fire time (ms since epoch), sent as ISO text. */
  fireAt?: number;
  payload: { n: number };
  maxWaitMs?: number;
  maxAttempts?: number;
};

/** A fire time and payload of a firing as an answer gave them. */
export type Version = { fireAt: number; payload: unknown; maxAttempts: number };

/** A debounce burst: its first call lies between startLow and startHigh; its cap, once an answer told it. */
export type Burst = { startLow: number; startHigh: number; maxWaitMs: number | null; maxWaitUntil: number | null };

export type Firing = {
  /** Its delivery row's id: the webhook-id (Idempotency-Key) of its calls. */
  id: string;
  versions: Version[];
  /** Each change answered 200 (moved): the fire time it left, and when the answer came. */
  moves: { from: number; answeredAt: number }[];
  burst: Burst | null;
  /** A DELETE answered 200 CANCELLED: when that answer came (the first one). */
  cancelledAt: number | null;
  /** A DELETE answered 409 TIMER_DELIVERED: when (it was delivered before). */
  deliveredBy: number | null;
  /** A replace answered 201 while this firing was current: it was done by then. */
  doneBy: number | null;
  /**
   * A later firing of its timer answered (201): this one was withdrawn then
   * (CANCELLED if pending or failed; a call running decides; a refusal stays).
   */
  supersededAt: number | null;
};

export type Timer = {
  client: ModelClient;
  key: string;
  firings: Firing[];
  /** A request of it answered only after a retry (its first attempt may have changed it unseen): judged by the record alone. */
  uncertain: boolean;
};

export type Model = {
  timers: Timer[];
  /** Sequence of payloads and fresh keys: every request's payload differs. */
  seq: number;
  counts: { keeps: number; moved: number; refiredByPut: number; delivering409: number; cancels: number; bursts: number; duringCall: number };
  /** Rate-limit scopes the run set from the admin API (removed once it settled). */
  rateLimits: string[];
};

export const newModel = (): Model => ({
  timers: [],
  seq: 0,
  counts: { keeps: 0, moved: 0, refiredByPut: 0, delivering409: 0, cancels: 0, bursts: 0, duringCall: 0 },
  rateLimits: [],
});

/** The keys a run draws from: few, so requests meet timers that exist, of either client. */
export const KEY_POOL = 5;
export const poolKey = (r: Real, i: number) => `${r.tag}-k${i % KEY_POOL}`;
export const freshKey = (m: Model, r: Real, what: string) => `${r.tag}-${what}${m.seq++}`;

/** Every timer of the run has a key under this prefix. */
export const runPrefix = (r: Real) => `${r.tag}-`;

export const target = (r: Real) => ({ type: 'webhook', url: `${r.world.webhook.url}/timers` });

export const find = (m: Model, client: ModelClient, key: string) => m.timers.find((t) => t.client === client && t.key === key);
export const current = (t: Timer) => t.firings.at(-1) as Firing;
export const version = (f: Firing) => f.versions.at(-1) as Version;

export function otherClient(c: ModelClient): ModelClient {
  return MODEL_CLIENTS.find((x) => x !== c) as ModelClient;
}

/** The body of a PUT (or of a batch item, with its key). */
export function bodyOf(r: Real, input: PutInput): Record<string, unknown> {
  return {
    mode: input.mode,
    target: target(r),
    payload: input.payload,
    ...(input.delayMs !== undefined && { delayMs: input.delayMs }),
    ...(input.fireAt !== undefined && { fireAt: new Date(input.fireAt).toISOString() }),
    ...(input.maxWaitMs !== undefined && { maxWaitMs: input.maxWaitMs }),
    ...(input.maxAttempts !== undefined && { maxAttempts: input.maxAttempts }),
  };
}

export const attemptsOf = (input: PutInput) => input.maxAttempts ?? MODEL_TIMERS.MAX_ATTEMPTS;

/** The id of the timer's current firing as the database has it now (null: no such timer). */
export async function firingIdOf(r: Real, client: ModelClient, key: string): Promise<string | null> {
  const t = await dbRead(() => r.world.db.timer.findUnique({ where: { client_key: { client, key } }, select: { notificationId: true } }));
  return t?.notificationId ?? null;
}

/** A timer as the API answers it (the fields the rules read). */
export type TimerJson = {
  key: string;
  state: string;
  fireAt: string;
  attempts: number;
  maxAttempts: number;
  payload: unknown;
  maxWaitUntil: string | null;
};

export const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** A 4xx answer's code. */
export const codeOf = (res: Reply) => String(res.body.code);
