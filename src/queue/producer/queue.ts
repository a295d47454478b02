// The producer and operator side of one delay queue: schedule, reschedule and
// cancel by id, look jobs up, count them, and redrive or delete dead jobs.
// Input is validated (schedule-input.ts) before anything is written.
import { type BackoffPolicy, DEFAULT_BACKOFF } from '../backoff.js';
import type { JobInfo, JobState, JobTypeOptions, QueueStats } from '../types.js';
import { listDeadPage } from './dead-letters.js';
import { invalidOptions } from '../errors.js';
import { QUEUE_NAME_PATTERN, type ShardKeys, shardKeys, shardOf } from '../keys.js';
import { isCluster } from '../redis-client.js';
import { JOB_TYPE_PATTERN, type JobRecord, parseRecord } from '../record.js';
import {
  type Prepared,
  STATUS,
  type ScheduleInput,
  type ScheduleResult,
  type When,
  callsOf,
  checkId,
  checkMaxAttempts,
  decodePayload,
  prepareJob,
  timeOf,
} from './schedule-input.js';
import {
  CancelCode,
  type RedisClient,
  type ScheduleCode,
  type ScheduleHeader,
  runCancel,
  runDeleteDead,
  runInspect,
  runRedrive,
  runSchedule,
  runStats,
  runTrimDead,
  runUngroup,
} from '../scripts/scripts.js';

export type { JobInfo, JobState, JobTypeOptions, QueueStats } from '../types.js';

export type QueueOptions = {
  readonly name: string;
  /** Job types this queue accepts; scheduling any other type is an error. */
  readonly types: Readonly<Record<string, JobTypeOptions>>;
  /** Shards (job id hash mod shards), each on its own hash tag. Default 1. */
  readonly shards?: number;
  /**
   * Whether new job records go to the shard's record groups or (default) to
   * its one jobs HASH, the only place builds before the groups read them
   * (lua/lib/records.lua). Records are found in either place whatever this
   * says. The service passes QUEUE_RECORD_GROUPS (0 by default in this release).
   */
  readonly recordGroups?: boolean;
  /** Key prefix, default "dq". */
  readonly prefix?: string;
  /** Largest accepted payload after JSON encoding, in bytes. Default 64 KiB. */
  readonly maxPayloadBytes?: number;
  /** How long dead jobs are kept, and how many at most per shard (the oldest go first). Default 7 days, 100 000. */
  readonly deadRetention?: DeadRetention;
};

export type DeadRetention = { readonly maxAgeMs: number; readonly maxCount: number };
export const DEFAULT_DEAD_RETENTION: DeadRetention = { maxAgeMs: 7 * 24 * 3_600_000, maxCount: 100_000 };
/** A dead job stays at least this long whatever the count (a relay must be able to see it die). */
const DEAD_MIN_AGE_MS = 10 * 60_000;
/** Dead jobs removed per trim call, and calls per shard per trim: a sweep stays short. */
const TRIM_CALL = 1_000;
const TRIM_CALLS = 10;

export type { ScheduleInput, ScheduleMode, ScheduleResult, When } from './schedule-input.js';
export { decodePayload } from './schedule-input.js';

export const DEFAULT_MAX_ATTEMPTS = 5;

export type Queue = ReturnType<typeof createQueue>;

export function createQueue(redis: RedisClient, options: QueueOptions) {
  const name = options.name;
  const shards = options.shards ?? 1;
  const prefix = options.prefix ?? 'dq';
  const maxPayloadBytes = options.maxPayloadBytes ?? 64 * 1024;
  const deadRetention = options.deadRetention ?? DEFAULT_DEAD_RETENTION;
  const recordGroups = options.recordGroups ?? false;
  if (!QUEUE_NAME_PATTERN.test(name)) invalidOptions(`queue name must match ${QUEUE_NAME_PATTERN}: ${name}`);
  if (!Number.isInteger(shards) || shards < 1 || shards > 1024) invalidOptions(`shards must be 1..1024: ${shards}`);
  for (const [type, t] of Object.entries(options.types)) {
    if (!JOB_TYPE_PATTERN.test(type)) invalidOptions(`job type must match ${JOB_TYPE_PATTERN}: ${type}`);
    if (t.maxAttempts !== undefined) checkMaxAttempts(t.maxAttempts);
  }
  const keys: ShardKeys[] = Array.from({ length: shards }, (_, s) => shardKeys(prefix, name, s));
  const scheduledListeners: ((count: number) => void)[] = [];
  const announce = (count: number) => {
    if (count > 0) for (const l of scheduledListeners) l(count);
  };
  const keysOf = (id: string): ShardKeys => keys[shardOf(id, shards)] as ShardKeys;

  function maxAttemptsOf(type: string, override: number | undefined): number {
    return override ?? options.types[type]?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  }

  const prepare = (input: ScheduleInput): Prepared => prepareJob(input, name, options.types, maxPayloadBytes);

  /**
   * Bulk schedule, results in input order. Every job is validated before any is
   * written; then each shard gets script calls of up to CALL_JOBS consecutive
   * jobs with equal settings. Each call is atomic, the bulk as a whole is not:
   * after a failure, some jobs may be scheduled (scheduling again is idempotent).
   */
  async function scheduleMany(inputs: readonly ScheduleInput[]): Promise<ScheduleResult[]> {
    const prepared = inputs.map(prepare); // validate all before writing any
    const byShard = new Map<number, number[]>();
    prepared.forEach((p, i) => {
      const sh = shardOf(p.item.id, shards);
      const list = byShard.get(sh);
      if (list) list.push(i);
      else byShard.set(sh, [i]);
    });
    const results = new Array<ScheduleResult>(prepared.length);
    const calls: Promise<void>[] = [];
    for (const [sh, idx] of byShard) {
      const runs = callsOf(prepared, idx);
      const send = (run: number[]) =>
        runSchedule(
          redis,
          keys[sh] as ShardKeys,
          (prepared[run[0] as number] as Prepared).header,
          run.map((i) => (prepared[i] as Prepared).item),
          recordGroups,
        ).then((replies) => replies.forEach((r, j) => (results[run[j] as number] = { status: STATUS[r.code], dueAt: r.dueAt })));
      // The calls of one shard go out back to back on one connection, so Redis
      // runs them in input order and a repeated id sees the writes before it.
      // A cluster client may retry one call (TRYAGAIN during a slot move) after
      // a later one went through: there, calls that repeat an id wait their turn.
      const ordered = runs.length > 1 && isCluster(redis) && new Set(idx.map((i) => (prepared[i] as Prepared).item.id)).size < idx.length;
      if (ordered) calls.push(runs.reduce<Promise<void>>((prev, run) => prev.then(() => send(run)), Promise.resolve()));
      else for (const run of runs) calls.push(send(run));
    }
    await Promise.all(calls);
    announce(results.filter((r) => r.status === 'created' || r.status === 'updated').length);
    return results;
  }

  async function schedule(input: ScheduleInput): Promise<ScheduleResult> {
    const [r] = await scheduleMany([input]);
    return r as ScheduleResult;
  }

  /** Move a pending or in-flight job to a new due time, keeping type and payload. */
  async function reschedule(id: string, when: When): Promise<ScheduleResult> {
    checkId(id);
    const { timeKind, time } = timeOf(when);
    const header: ScheduleHeader = { mode: 'xx', timeKind, type: '', maxAttempts: undefined };
    const [r] = await runSchedule(redis, keysOf(id), header, [{ id, time, payload: '' }], recordGroups);
    const status = STATUS[(r as { code: ScheduleCode }).code];
    announce(status === 'updated' ? 1 : 0);
    return { status, dueAt: r?.dueAt ?? 0 };
  }

  async function cancel(id: string): Promise<{ cancelled: boolean; state: JobState | null }> {
    checkId(id);
    const code = await runCancel(redis, keysOf(id), id);
    const state: Record<CancelCode, JobState | null> = {
      [CancelCode.NOT_FOUND]: null,
      [CancelCode.PENDING]: 'pending',
      [CancelCode.IN_FLIGHT]: 'in_flight',
      [CancelCode.DEAD]: 'dead',
    };
    return { cancelled: code !== CancelCode.NOT_FOUND, state: state[code] };
  }

  async function get(id: string): Promise<JobInfo | null> {
    checkId(id);
    const r = await runInspect(redis, keysOf(id), id);
    if (r.record === null) return null;
    const state: JobState = r.diedAt !== null ? 'dead' : r.leaseUntil !== null ? 'in_flight' : 'pending';
    let rec: JobRecord;
    let payload: unknown;
    try {
      rec = parseRecord(r.record);
      payload = decodePayload(rec.payload);
    } catch {
      // A record a claim parked as corrupt (or a payload that is not JSON) is
      // shown as its raw text: a lookup and the dead-letter listing must still
      // answer, so an operator can see it and delete it.
      const times = { dueAt: r.dueAt, leaseUntil: r.leaseUntil, diedAt: r.diedAt, lastError: r.lastError };
      return { id, state, type: '', payload: r.record, attempts: 0, maxAttempts: 0, ...times };
    }
    return {
      id,
      state,
      type: rec.type,
      payload,
      attempts: rec.attempts,
      maxAttempts: maxAttemptsOf(rec.type, rec.maxAttempts),
      dueAt: r.dueAt,
      leaseUntil: r.leaseUntil,
      diedAt: r.diedAt,
      lastError: r.lastError,
    };
  }

  async function shardStats(): Promise<QueueStats[]> {
    return Promise.all(
      keys.map(async (k, shard) => {
        const s = await runStats(redis, k);
        const lag = s.dueNow > 0 && s.nextDueAt !== null ? Math.max(0, s.now - s.nextDueAt) : 0;
        const { now: _now, ...counts } = s;
        return { queue: name, shard, ...counts, oldestDueLagMs: lag };
      }),
    );
  }

  /** The queue's totals and each shard's figures, from one read of every shard. */
  async function overview(): Promise<{ total: QueueStats; shards: QueueStats[] }> {
    const per = await shardStats();
    const sum = (f: (s: QueueStats) => number) => per.reduce((a, s) => a + f(s), 0);
    const heads = per.map((s) => s.nextDueAt).filter((v): v is number => v !== null);
    const total: QueueStats = {
      queue: name,
      shard: 'all',
      pending: sum((s) => s.pending),
      dueNow: sum((s) => s.dueNow),
      inFlight: sum((s) => s.inFlight),
      dead: sum((s) => s.dead),
      nextDueAt: heads.length ? Math.min(...heads) : null,
      oldestDueLagMs: Math.max(0, ...per.map((s) => s.oldestDueLagMs)),
    };
    return { total, shards: per };
  }

  async function stats(): Promise<QueueStats> {
    return (await overview()).total;
  }

  async function redrive(id: string): Promise<boolean> {
    checkId(id);
    return (await runRedrive(redis, keysOf(id), { id })) === 1;
  }

  /** Redrive up to `max` of the oldest dead jobs per shard. */
  async function redriveAll(max = 1_000): Promise<number> {
    const counts = await Promise.all(keys.map((k) => runRedrive(redis, k, { max })));
    return counts.reduce((a, b) => a + b, 0);
  }

  /** One page of dead jobs, oldest death first, across shards (see dead-letters.ts). */
  function listDead(cursor: string | null, limit = 50): Promise<{ jobs: JobInfo[]; next: string | null }> {
    return listDeadPage({ redis, keys, get }, cursor, limit);
  }

  /** Removes dead jobs past the retention (a bounded number per shard); returns how many. */
  async function trimDead(): Promise<number> {
    let removed = 0;
    for (const k of keys) {
      for (let i = 0; i < TRIM_CALLS; i++) {
        const n = await runTrimDead(redis, k, deadRetention.maxAgeMs, deadRetention.maxCount, TRIM_CALL, DEAD_MIN_AGE_MS);
        removed += n;
        if (n < TRIM_CALL) break;
      }
    }
    return removed;
  }

  /**
   * Moves every record out of the record groups into the shards' jobs HASHes
   * (for a rollback to a build that reads only those), 100 groups a call;
   * returns how many moved. Every process must write with groups off
   * (recordGroups false) meanwhile, or records go back as they are written.
   */
  async function ungroup(): Promise<number> {
    let moved = 0;
    for (const k of keys) {
      let passes = 1;
      for (let next: number | null = null; next !== -1;) {
        const r = await runUngroup(redis, k, next, 100);
        moved += r.moved;
        next = r.next === -2 ? null : r.next;
        // Records written into the groups behind the cursor: once more from the top, a few times at most.
        if (r.next === -2 && ++passes > 3) {
          throw new Error(`record groups of ${k.records} keep filling while they are emptied: a process still runs with QUEUE_RECORD_GROUPS=1`);
        }
      }
    }
    return moved;
  }

  async function deleteDead(id: string): Promise<boolean> {
    checkId(id);
    return (await runDeleteDead(redis, keysOf(id), [id])) === 1;
  }

  return {
    name,
    prefix,
    shards,
    /** Whether new records go to the record groups: set only once no process of a build before the groups runs. */
    recordGroups,
    keys: keys as readonly ShardKeys[],
    maxAttemptsOf,
    backoffOf: (type: string): BackoffPolicy => options.types[type]?.backoff ?? DEFAULT_BACKOFF,
    types: Object.keys(options.types),
    schedule,
    scheduleMany,
    reschedule,
    cancel,
    get,
    stats,
    shardStats,
    overview,
    redrive,
    redriveAll,
    deleteDead,
    ungroup,
    trimDead,
    listDead,
    /** Calls `listener` with the number of jobs each schedule call created or moved (for metrics). */
    onScheduled(listener: (count: number) => void): void {
      scheduledListeners.push(listener);
    },
  };
}
