// Scheduling by id: schedule and scheduleMany (bulk, validated before any
// write), reschedule (a new due time, same type and payload) and cancel.
// Every call that created or moved jobs is announced with their number.
import type { JobState } from '../types.js';
import { isCluster } from '../redis-client.js';
import { CancelCode, type ScheduleCode, type ScheduleHeader, runCancel, runSchedule } from '../scripts/schedule-scripts.js';
import { type ShardKeys, shardOf } from '../keys.js';
import type { QueueSetup } from './queue-options.js';
import { type Prepared, STATUS, type ScheduleInput, type ScheduleResult, type When, callsOf, checkId, prepareJob, timeOf } from './schedule-input.js';

/** What a cancel found: the state the job was in, or null for no job. */
const CANCELLED_STATE: Record<CancelCode, JobState | null> = {
  [CancelCode.NOT_FOUND]: null,
  [CancelCode.PENDING]: 'pending',
  [CancelCode.IN_FLIGHT]: 'in_flight',
  [CancelCode.DEAD]: 'dead',
};

export function createScheduling(q: QueueSetup, announce: (count: number) => void) {
  const { redis, name, shards, keys, keysOf, recordGroups } = q;
  const prepare = (input: ScheduleInput): Prepared => prepareJob(input, name, q.types, q.maxPayloadBytes);

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
    return { cancelled: code !== CancelCode.NOT_FOUND, state: CANCELLED_STATE[code] };
  }

  return { schedule, scheduleMany, reschedule, cancel };
}
