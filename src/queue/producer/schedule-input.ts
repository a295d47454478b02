// What a schedule call is given, checked and encoded before anything is
// written: job ids, due times and delays, payload size, job types and modes;
// and how a bulk schedule is cut into script calls. Every refusal is a
// QueueInputError with a stable code.
import type { JobTypeOptions } from '../types.js';
import { QueueErrorCode, QueueInputError, invalidOptions } from '../errors.js';
import { DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY } from '../record.js';
import { ScheduleCode, type ScheduleHeader, type ScheduleItem } from '../scripts/schedule-scripts.js';

export type ScheduleMode = 'upsert' | 'nx' | 'xx' | 'pending';
export type When = { readonly at: number | Date } | { readonly delayMs: number };
export type ScheduleInput = When & {
  readonly id: string;
  readonly type: string;
  readonly payload?: unknown;
  /**
   * upsert (default): create or move; nx: only if absent; xx: only if pending
   * or in flight; pending: only if pending (never a delivery in progress).
   */
  readonly mode?: ScheduleMode;
  readonly maxAttempts?: number;
  /**
   * 0..9 (default 5): among jobs already due, higher is claimed first; a job
   * overdue by more than the queue's priorityAgingMs is claimed ahead of
   * priority, oldest first (lua/lib/due-index.lua). Nothing runs before its time.
   */
  readonly priority?: number;
};
/** exists: pending or in flight; dead: in the dead set (nx only), where it stays unless redriven. */
export type ScheduleResult = { readonly status: 'created' | 'updated' | 'exists' | 'not_found' | 'dead'; readonly dueAt: number };

// Jobs per schedule script call. A bulk schedule is split into calls sent back
// to back, so Redis runs the first while the client still encodes the next
// (about 95 000 jobs/s at 250 against 82 000 in one call of 1 000).
const CALL_JOBS = 250;
const MAX_ID_LENGTH = 256;
// Up to year 2286 in ms: beyond that a due time is a bug, not a plan.
const MAX_DUE_MS = 10_000_000_000_000;
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
const MODES: Record<ScheduleMode, ScheduleHeader['mode']> = { upsert: 'upsert', nx: 'nx', xx: 'xx', pending: 'xp' };

/** Every answer but STALE_LAYOUT, which the scheduling code retries and never returns. */
export const STATUS: Record<Exclude<ScheduleCode, typeof ScheduleCode.STALE_LAYOUT>, ScheduleResult['status']> = {
  [ScheduleCode.CREATED]: 'created',
  [ScheduleCode.UPDATED]: 'updated',
  [ScheduleCode.EXISTS]: 'exists',
  [ScheduleCode.NOT_FOUND]: 'not_found',
  [ScheduleCode.DEAD]: 'dead',
};

export type Prepared = { readonly header: ScheduleHeader; readonly item: ScheduleItem };

/** Checks one input against the queue's job types and limits; throws a QueueInputError, writes nothing. */
export function prepareJob(input: ScheduleInput, queueName: string, types: Readonly<Record<string, JobTypeOptions>>, maxPayloadBytes: number): Prepared {
  checkId(input.id);
  if (!Object.hasOwn(types, input.type)) {
    throw new QueueInputError(QueueErrorCode.UNKNOWN_JOB_TYPE, `queue ${queueName} has no job type "${input.type}"`);
  }
  if (input.maxAttempts !== undefined) checkMaxAttempts(input.maxAttempts);
  const priority = priorityOf(input.priority);
  const { timeKind, time } = timeOf(input);
  const m = input.mode ?? 'upsert';
  const mode = Object.hasOwn(MODES, m) ? MODES[m] : undefined;
  if (!mode) invalidOptions(`mode must be upsert, nx, xx or pending: ${String(input.mode)}`);
  return {
    header: { mode, timeKind, type: input.type, maxAttempts: input.maxAttempts, priority },
    item: { id: input.id, time, payload: encodePayload(input.payload, maxPayloadBytes) },
  };
}

/**
 * Splits one shard's jobs (input indexes) into calls of equal settings, at
 * most CALL_JOBS each. Jobs of distinct ids are grouped by their settings (a
 * bulk of mixed priorities is a few calls, not one per change); when an id
 * repeats, consecutive runs, so each job sees the writes of those before it.
 */
export function callsOf(prepared: readonly Prepared[], idx: readonly number[]): number[][] {
  const at = (i: number) => prepared[i] as Prepared;
  if (new Set(idx.map((i) => at(i).item.id)).size === idx.length) {
    const groups = new Map<string, number[]>();
    for (const i of idx) {
      const h = at(i).header;
      const key = `${h.mode}|${h.timeKind}|${h.type}|${h.maxAttempts ?? ''}|${h.priority ?? ''}`;
      const g = groups.get(key);
      if (g) g.push(i);
      else groups.set(key, [i]);
    }
    if (groups.size > 1) return [...groups.values()].flatMap((g) => consecutiveCalls(prepared, g));
  }
  return consecutiveCalls(prepared, idx);
}

function consecutiveCalls(prepared: readonly Prepared[], idx: readonly number[]): number[][] {
  const runs: number[][] = [];
  for (let start = 0; start < idx.length;) {
    const first = (prepared[idx[start] as number] as Prepared).header;
    let end = start + 1;
    const limit = Math.min(idx.length, start + CALL_JOBS);
    while (end < limit && sameHeader((prepared[idx[end] as number] as Prepared).header, first)) end++;
    runs.push(idx.slice(start, end));
    start = end;
  }
  return runs;
}

function sameHeader(a: ScheduleHeader, b: ScheduleHeader): boolean {
  return a.mode === b.mode && a.timeKind === b.timeKind && a.type === b.type && a.maxAttempts === b.maxAttempts && a.priority === b.priority;
}

/** A job's priority as the record keeps it: undefined for the default (none written). */
export function priorityOf(p: unknown): number | undefined {
  if (p === undefined) return undefined;
  if (typeof p !== 'number' || !Number.isInteger(p) || p < MIN_PRIORITY || p > MAX_PRIORITY) {
    throw new QueueInputError(QueueErrorCode.INVALID_PRIORITY, `priority must be an integer ${MIN_PRIORITY}..${MAX_PRIORITY}: ${String(p)}`);
  }
  return p === DEFAULT_PRIORITY ? undefined : p;
}

export function checkMaxAttempts(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > 1_000) invalidOptions(`maxAttempts must be an integer 1..1000: ${n}`);
}

export function checkId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH || CONTROL_CHARS.test(id)) {
    throw new QueueInputError(QueueErrorCode.INVALID_JOB_ID, `job id must be 1..${MAX_ID_LENGTH} characters without control characters`);
  }
}

export function timeOf(when: When): { timeKind: 'at' | 'in'; time: number } {
  if ('at' in when) {
    const at = when.at instanceof Date ? when.at.getTime() : when.at;
    if (typeof at !== 'number' || !Number.isFinite(at) || at < 0 || at > MAX_DUE_MS) {
      throw new QueueInputError(QueueErrorCode.INVALID_DUE_TIME, `due time must be a finite time in ms: ${String(at)}`);
    }
    return { timeKind: 'at', time: Math.floor(at) };
  }
  const d = when.delayMs;
  if (typeof d !== 'number' || !Number.isFinite(d) || d < 0 || d > MAX_DUE_MS) {
    throw new QueueInputError(QueueErrorCode.INVALID_DUE_TIME, `delay must be a finite, non-negative ms count: ${String(d)}`);
  }
  return { timeKind: 'in', time: Math.floor(d) };
}

function encodePayload(payload: unknown, maxBytes: number): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(payload ?? null);
  } catch (err) {
    throw new QueueInputError(QueueErrorCode.INVALID_PAYLOAD, `payload is not JSON-serialisable: ${String(err)}`);
  }
  if (text === undefined) throw new QueueInputError(QueueErrorCode.INVALID_PAYLOAD, 'payload is not JSON-serialisable');
  // Cheap upper bound first: a UTF-16 unit is at most 3 UTF-8 bytes.
  if (text.length * 3 > maxBytes && Buffer.byteLength(text) > maxBytes) {
    throw new QueueInputError(QueueErrorCode.PAYLOAD_TOO_LARGE, `payload is larger than ${maxBytes} bytes`);
  }
  return text;
}

export function decodePayload(text: string): unknown {
  return text === '' ? null : JSON.parse(text);
}
