// Loads the Lua scripts in lua/ once per Redis client (defineCommand: EVALSHA with
// an EVAL fallback after a Redis restart) and gives each a typed function.
// Scripts that use the due index get lua/lib/due-index.lua in front of them.
// Only this file builds KEYS/ARGV arrays.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ShardKeys } from './keys.js';
import type { RedisClient } from './redis-client.js';

export type { RedisClient };

const LUA_DIR = fileURLToPath(new URL('../../lua/', import.meta.url));

// dueIndex: the script runs with lua/lib/due-index.lua in front of it.
const SCRIPTS = {
  dqSchedule: { file: 'schedule.lua', keys: 6, dueIndex: true },
  dqClaim: { file: 'claim.lua', keys: 7, dueIndex: true },
  dqAck: { file: 'ack.lua', keys: 3, dueIndex: false },
  dqNack: { file: 'nack.lua', keys: 6, dueIndex: true },
  dqExtend: { file: 'extend.lua', keys: 2, dueIndex: false },
  dqRelease: { file: 'release.lua', keys: 4, dueIndex: true },
  dqCancel: { file: 'cancel.lua', keys: 6, dueIndex: true },
  dqRedrive: { file: 'redrive.lua', keys: 4, dueIndex: true },
  dqDeleteDead: { file: 'delete-dead.lua', keys: 3, dueIndex: false },
  dqInspect: { file: 'inspect.lua', keys: 4, dueIndex: true },
  dqStats: { file: 'stats.lua', keys: 5, dueIndex: true },
  bqAdd: { file: 'batch-add.lua', keys: 2, dueIndex: false },
  bqTakeDue: { file: 'batch-take-due.lua', keys: 2, dueIndex: false },
  bqRemove: { file: 'batch-remove.lua', keys: 2, dueIndex: false },
  bqRestore: { file: 'batch-restore.lua', keys: 2, dueIndex: false },
} as const;
export type ScriptName = keyof typeof SCRIPTS;
type RawReply = unknown;
type ScriptFn = (...keysAndArgs: (string | number)[]) => Promise<RawReply>;

const read = (file: string) => readFileSync(LUA_DIR + file, 'utf8');

const sources = new Map<ScriptName, string>();
function source(name: ScriptName): string {
  let lua = sources.get(name);
  if (lua === undefined) {
    const s = SCRIPTS[name];
    lua = s.dueIndex ? `${read('lib/due-index.lua')}\n${read(s.file)}` : read(s.file);
    sources.set(name, lua);
  }
  return lua;
}

const defined = new WeakSet<RedisClient>();

function ensureDefined(redis: RedisClient): void {
  if (defined.has(redis)) return;
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    redis.defineCommand(name, { numberOfKeys: SCRIPTS[name].keys, lua: source(name) });
  }
  defined.add(redis);
}

/** Runs a registered script; only the engine's script wrappers call this. */
export function call(redis: RedisClient, name: ScriptName, args: (string | number)[]): Promise<RawReply> {
  ensureDefined(redis);
  const fn = (redis as unknown as Record<ScriptName, ScriptFn>)[name];
  return fn.apply(redis, args);
}

/** What a whole schedule call shares; sent once per call, not once per job. */
export type ScheduleHeader = {
  /** xp: only if pending (due, not in flight). */
  mode: 'upsert' | 'nx' | 'xx' | 'xp';
  timeKind: 'at' | 'in';
  /** '' keeps each job's current type and payload (reschedule). */
  type: string;
  maxAttempts: number | undefined;
};

export type ScheduleItem = {
  id: string;
  /** ms since epoch ("at") or ms from the Redis clock's now ("in"). */
  time: number;
  payload: string;
};

export const ScheduleCode = { CREATED: 1, UPDATED: 2, EXISTS: 3, NOT_FOUND: 4 } as const;
export type ScheduleCode = (typeof ScheduleCode)[keyof typeof ScheduleCode];

/** One reply per item, in order; dueAt is 0 when nothing was written. */
export async function runSchedule(
  redis: RedisClient,
  k: ShardKeys,
  h: ScheduleHeader,
  items: readonly ScheduleItem[],
): Promise<{ code: ScheduleCode; dueAt: number }[]> {
  const args: (string | number)[] = [k.due, k.dueBuckets, k.inflight, k.jobs, k.dead, k.errors, k.wake, items.length];
  args.push(h.mode, h.timeKind, h.type, h.maxAttempts ?? '');
  for (const it of items) args.push(it.id, it.time, it.payload);
  const [now, codes] = (await call(redis, 'dqSchedule', args)) as [number, string];
  const base = h.timeKind === 'in' ? Number(now) : 0;
  const out = new Array<{ code: ScheduleCode; dueAt: number }>(items.length);
  for (let i = 0; i < items.length; i++) {
    const code = (codes.charCodeAt(i) - 48) as ScheduleCode;
    const written = code === ScheduleCode.CREATED || code === ScheduleCode.UPDATED;
    out[i] = { code, dueAt: written ? base + (items[i] as ScheduleItem).time : 0 };
  }
  return out;
}

export type ClaimedRaw = { id: string; dueAt: number; record: string };
export type ClaimReply = {
  now: number;
  nextDue: number | null;
  nextLease: number | null;
  reclaimed: number;
  jobs: ClaimedRaw[];
};

export async function runClaim(
  redis: RedisClient,
  k: ShardKeys,
  max: number,
  leaseMs: number,
  maxReclaim: number,
): Promise<ClaimReply> {
  const r = (await call(redis, 'dqClaim', [k.due, k.dueBuckets, k.seq, k.inflight, k.jobs, k.errors, k.dead, max, leaseMs, maxReclaim])) as (
    | string
    | number
  )[];
  const jobs: ClaimedRaw[] = [];
  for (let i = 4; i < r.length; i += 3) {
    jobs.push({ id: String(r[i]), dueAt: Number(r[i + 1]), record: String(r[i + 2]) });
  }
  const orNull = (v: unknown) => (Number(v) < 0 ? null : Number(v));
  return { now: Number(r[0]), nextDue: orNull(r[1]), nextLease: orNull(r[2]), reclaimed: Number(r[3]), jobs };
}

/** Returns the ids whose token no longer matched (nothing was changed for them). */
export async function runAck(
  redis: RedisClient,
  k: ShardKeys,
  items: readonly { id: string; token: number }[],
): Promise<{ acked: number; stale: string[] }> {
  const args: (string | number)[] = [k.inflight, k.jobs, k.errors];
  for (const it of items) args.push(it.id, it.token);
  const r = (await call(redis, 'dqAck', args)) as (string | number)[];
  return { acked: Number(r[0]), stale: r.slice(1).map(String) };
}

export const NackCode = { STALE: 0, RETRY: 1, DEAD: 2 } as const;
export type NackCode = (typeof NackCode)[keyof typeof NackCode];

export async function runNack(
  redis: RedisClient,
  k: ShardKeys,
  id: string,
  token: number,
  outcome: 'retry' | 'dead',
  delayMs: number,
  error: string,
): Promise<{ code: NackCode; at: number }> {
  const r = (await call(redis, 'dqNack', [
    k.inflight,
    k.due,
    k.dueBuckets,
    k.jobs,
    k.errors,
    k.dead,
    id,
    token,
    outcome,
    delayMs,
    error,
    k.wake,
  ])) as number[];
  return { code: r[0] as NackCode, at: Number(r[1]) };
}

/** Returns the new lease deadline (ms), or null when the lease is lost. */
export async function runExtend(
  redis: RedisClient,
  k: ShardKeys,
  id: string,
  token: number,
  leaseMs: number,
): Promise<number | null> {
  const r = Number(await call(redis, 'dqExtend', [k.inflight, k.jobs, id, token, leaseMs]));
  return r > 0 ? r : null;
}

/** `when`: a delay from the Redis clock's now (default 0), or an absolute due time. */
export async function runRelease(
  redis: RedisClient,
  k: ShardKeys,
  items: readonly { id: string; token: number }[],
  when: { delayMs: number } | { at: number } = { delayMs: 0 },
): Promise<number> {
  const time = 'at' in when ? ['at', Math.floor(when.at)] : ['in', Math.max(0, Math.ceil(when.delayMs))];
  const args: (string | number)[] = [k.inflight, k.due, k.dueBuckets, k.jobs, k.wake, ...time];
  for (const it of items) args.push(it.id, it.token);
  return Number(await call(redis, 'dqRelease', args));
}

export const CancelCode = { NOT_FOUND: 0, PENDING: 1, IN_FLIGHT: 2, DEAD: 3 } as const;
export type CancelCode = (typeof CancelCode)[keyof typeof CancelCode];

export async function runCancel(redis: RedisClient, k: ShardKeys, id: string): Promise<CancelCode> {
  return Number(await call(redis, 'dqCancel', [k.due, k.dueBuckets, k.inflight, k.jobs, k.dead, k.errors, id])) as CancelCode;
}

export async function runRedrive(
  redis: RedisClient,
  k: ShardKeys,
  target: { id: string } | { max: number },
): Promise<number> {
  const sel = 'id' in target ? ['one', target.id] : ['all', target.max];
  return Number(await call(redis, 'dqRedrive', [k.dead, k.due, k.dueBuckets, k.jobs, k.wake, ...sel]));
}

export async function runDeleteDead(redis: RedisClient, k: ShardKeys, ids: readonly string[]): Promise<number> {
  return Number(await call(redis, 'dqDeleteDead', [k.dead, k.jobs, k.errors, ...ids]));
}

export type InspectReply = {
  record: string | null;
  dueAt: number | null;
  leaseUntil: number | null;
  diedAt: number | null;
  lastError: string | null;
};

export async function runInspect(redis: RedisClient, k: ShardKeys, id: string): Promise<InspectReply> {
  const r = (await call(redis, 'dqInspect', [k.inflight, k.jobs, k.dead, k.errors, id])) as (string | null)[];
  const num = (v: string | null | undefined) => (v == null ? null : Number(v));
  return {
    record: r[0] ?? null,
    dueAt: num(r[1]),
    leaseUntil: num(r[2]),
    diedAt: num(r[3]),
    lastError: r[4] ?? null,
  };
}

export type StatsReply = {
  now: number;
  pending: number;
  dueNow: number;
  inFlight: number;
  dead: number;
  nextDueAt: number | null;
};

export async function runStats(redis: RedisClient, k: ShardKeys): Promise<StatsReply> {
  const r = ((await call(redis, 'dqStats', [k.due, k.dueBuckets, k.inflight, k.dead, k.jobs])) as number[]).map(Number);
  return {
    now: r[0] ?? 0,
    pending: r[1] ?? 0,
    dueNow: r[2] ?? 0,
    inFlight: r[3] ?? 0,
    dead: r[4] ?? 0,
    nextDueAt: (r[5] ?? -1) < 0 ? null : (r[5] ?? null),
  };
}
