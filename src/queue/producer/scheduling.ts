// Scheduling by id: schedule and scheduleMany (bulk, validated before any
// write), reschedule (a new due time, same type and payload) and cancel.
// Every call that created or moved jobs is announced with their number.
import type { JobState } from '../types.js';
import { isCluster } from '../redis-client.js';
import { CancelCode, ScheduleCode, type ScheduleHeader, runCancel, runSchedule } from '../scripts/schedule-scripts.js';
import { STALE, shardsOf, withLayout } from '../shard-layout.js';
import { type WriteBy, scheduleWhileMoving } from './moving-writes.js';
import { type ShardKeys, shardOf } from '../keys.js';
import type { QueueSetup } from './queue-options.js';
import { type Prepared, STATUS, type ScheduleInput, type ScheduleResult, type When, callsOf, checkId, prepareJob, timeOf } from './schedule-input.js';

/** What a cancel found: the state the job was in, or null for no job. */
const CANCELLED_STATE: Record<Exclude<CancelCode, typeof CancelCode.STALE_LAYOUT>, JobState | null> = {
  [CancelCode.NOT_FOUND]: null,
  [CancelCode.PENDING]: 'pending',
  [CancelCode.IN_FLIGHT]: 'in_flight',
  [CancelCode.DEAD]: 'dead',
};

export function createScheduling(q: QueueSetup, announce: (count: number) => void) {
  const { redis, name, keys, layout, recordGroups } = q;
  const prepare = (input: ScheduleInput): Prepared => prepareJob(input, name, q.types, q.maxPayloadBytes);

  /**
   * Bulk schedule, results in input order. Every job is validated before any is
   * written; then each shard gets script calls of up to CALL_JOBS consecutive
   * jobs with equal settings. Each call is atomic, the bulk as a whole is not:
   * after a failure, some jobs may be scheduled (scheduling again is idempotent).
   */
  async function scheduleMany(inputs: readonly ScheduleInput[]): Promise<ScheduleResult[]> {
    const prepared = inputs.map(prepare); // validate all before writing any
    const results = new Array<ScheduleResult>(prepared.length);
    let todo = prepared.map((_, i) => i);
    // A job a fenced shard refused (null) was not written: it goes again by the layout read afresh.
    await withLayout(layout, async (l) => {
      const write: WriteBy = (idx, shards) => writeBy(prepared, idx, (p) => shardOf(p.item.id, shards), l.epoch);
      const got = l.phase === 'move' ? await scheduleWhileMoving({ redis, keys }, l, prepared, todo, write) : await write(todo, l.from);
      for (const i of todo) if (got[i]) results[i] = got[i];
      todo = todo.filter((i) => !got[i]);
      return todo.length > 0 ? STALE : undefined;
    });
    announce(results.filter((r) => r.status === 'created' || r.status === 'updated').length);
    return results;
  }

  /** Writes prepared[i] for each i of idx to its shard; the results at those positions (null: refused by the fence, not written). */
  async function writeBy(
    prepared: readonly Prepared[],
    all: readonly number[],
    shardOfJob: (p: Prepared) => number,
    epoch: number,
  ): Promise<(ScheduleResult | null)[]> {
    const byShard = new Map<number, number[]>();
    for (const i of all) {
      const sh = shardOfJob(prepared[i] as Prepared);
      const list = byShard.get(sh);
      if (list) list.push(i);
      else byShard.set(sh, [i]);
    }
    const results = new Array<ScheduleResult | null>(prepared.length);
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
          epoch,
        ).then((replies) =>
          replies.forEach((r, j) => (results[run[j] as number] = r.code === ScheduleCode.STALE_LAYOUT ? null : { status: STATUS[r.code], dueAt: r.dueAt })),
        );
      // The calls of one shard go out back to back on one connection, so Redis
      // runs them in input order and a repeated id sees the writes before it.
      // A cluster client may retry one call (TRYAGAIN during a slot move) after
      // a later one went through: there, calls that repeat an id wait their turn.
      const ordered = runs.length > 1 && isCluster(redis) && new Set(idx.map((i) => (prepared[i] as Prepared).item.id)).size < idx.length;
      if (ordered) calls.push(runs.reduce<Promise<void>>((prev, run) => prev.then(() => send(run)), Promise.resolve()));
      else for (const run of runs) calls.push(send(run));
    }
    await Promise.all(calls);
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
    const header: ScheduleHeader = { mode: 'xx', timeKind, type: '', maxAttempts: undefined, priority: undefined };
    // While a change of the shard count moves jobs, the old shard first: a job
    // only moves from there to its new one, so it cannot slip past both looks.
    const r = await withLayout(layout, async (l) => {
      let got: { code: ScheduleCode; dueAt: number } | undefined;
      for (const sh of shardsOf(l, id)) {
        [got] = await runSchedule(redis, keys[sh] as ShardKeys, header, [{ id, time, payload: '' }], recordGroups, l.epoch);
        if (got?.code !== ScheduleCode.NOT_FOUND) break;
      }
      return got?.code === ScheduleCode.STALE_LAYOUT ? STALE : (got as { code: Exclude<ScheduleCode, 6>; dueAt: number });
    });
    const status = STATUS[r.code];
    announce(status === 'updated' ? 1 : 0);
    return { status, dueAt: r.dueAt };
  }

  async function cancel(id: string): Promise<{ cancelled: boolean; state: JobState | null }> {
    checkId(id);
    // Every shard the job may be in, old first (see reschedule); the first
    // find counts, also one made before a fenced shard sent this round again.
    let code: CancelCode = CancelCode.NOT_FOUND;
    await withLayout(layout, async (l) => {
      for (const sh of shardsOf(l, id)) {
        const c = await runCancel(redis, keys[sh] as ShardKeys, id, l.epoch);
        if (c === CancelCode.STALE_LAYOUT) return STALE;
        if (code === CancelCode.NOT_FOUND) code = c;
      }
      return undefined;
    });
    return { cancelled: code !== CancelCode.NOT_FOUND, state: CANCELLED_STATE[code as Exclude<CancelCode, -1>] };
  }

  return { schedule, scheduleMany, reschedule, cancel };
}
