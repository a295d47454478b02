// The timers' rules: create, change (replace, keep, debounce), cancel, read.
// PostgreSQL holds each timer and its firing (a delivery row, the state);
// after the commit the firing's delivery job is scheduled at its fire time
// (Redis, the rebuildable index; the relay repairs a job that was missed).
//
// A change meets the firing in one of three states:
// - pending (waiting for its time or a retry): moved in place, or cancelled;
// - delivering (a call is running): a replace and a cancel are refused with
//   409 TIMER_DELIVERING, the truth, and nothing changes (the call decides);
//   a debounce starts a new burst: a new firing, as the event came after the
//   one that fired;
// - done (delivered, failed, cancelled): replace and debounce start a new
//   firing (201); a cancel of a delivered one is refused (409 TIMER_DELIVERED).
// keep never changes a timer that exists, whatever its state.
import { randomUUID } from 'node:crypto';
import type { Db } from '../../core/db.js';
import { ownerTransitions } from '../../core/delivery/index.js';
import { AppError } from '../../core/errors.js';
import { checkTarget, type TargetAllowlist } from './targets/allowlist.js';
import { type FiringPayload, type TimerRow, findTimer, findTimers, listTimers, pendingFirings, stateOf } from './sql/reads.js';
import { type NewFiring, createTimers, fireAgain, touchTimer } from './sql/writes.js';
import type { PutTimerInput, TimerState } from './timers.schemas.js';

/** A delivery job to schedule after the commit: a new firing's (`nx`), or a moved one's (`upsert`, replacing the old job). */
export type FiringJob = { rowId: string; dueAt: Date; firing: FiringPayload; mode: 'nx' | 'upsert' };

export type PutResult = { status: 200 | 201; timer: TimerRow };

export type TimersDeps = {
  db: Db;
  allow: TargetAllowlist;
  /** Attempts of a timer that names none (TIMER_MAX_ATTEMPTS). */
  defaultMaxAttempts: number;
  /** Schedules the delivery jobs of committed firings: best effort (the relay repairs a miss). */
  schedule: (jobs: readonly FiringJob[]) => Promise<void>;
  now?: () => number;
};

/** Tries at moving a pending firing that deliveries keep taking and handing back. */
const MOVE_TRIES = 3;
/** Rounds of putting a moved firing's job at the row's due time, while other changes keep moving it. */
const SETTLE_ROUNDS = 5;

const DELIVERING = (key: string) => new AppError('TIMER_DELIVERING', 409, `timer ${key} is being delivered; its outcome decides (read it again)`);
const NOT_FOUND = (key: string) => new AppError('TIMER_NOT_FOUND', 404, `no timer ${key}`);

export function createTimersService(d: TimersDeps) {
  const now = d.now ?? Date.now;

  /** The firing `input` asks for, at `at` (ms): its fire time, and its burst when debounced (capped by the burst's maximum wait). */
  function plan(key: string, input: PutTimerInput, at: number, burst: { startedAt: Date; maxWaitMs: number | null } | null) {
    const asked = input.fireAt !== undefined ? Date.parse(input.fireAt) : at + (input.delayMs ?? 0);
    let dueMs = asked;
    let b: { startedAt: Date | null; maxWaitMs: number | null } = { startedAt: null, maxWaitMs: null };
    if (input.mode === 'debounce') {
      const startedAt = burst?.startedAt ?? new Date(at);
      // A burst keeps its first call's maximum wait (none included).
      const maxWaitMs = burst ? burst.maxWaitMs : (input.maxWaitMs ?? null);
      if (maxWaitMs !== null) dueMs = Math.min(dueMs, startedAt.getTime() + maxWaitMs);
      b = { startedAt, maxWaitMs };
    }
    const dueAt = new Date(dueMs);
    const firing: FiringPayload = {
      key,
      payload: input.payload ?? null,
      fireAt: dueAt.toISOString(),
      target: input.target,
      maxAttempts: input.maxAttempts ?? d.defaultMaxAttempts,
    };
    return { dueAt, firing, burst: b };
  }

  const newFiring = (key: string, timerId: string, p: ReturnType<typeof plan>): NewFiring => ({
    key,
    timerId,
    rowId: randomUUID(),
    dueAt: p.dueAt,
    firing: p.firing,
    burstStartedAt: p.burst.startedAt,
    maxWaitMs: p.burst.maxWaitMs,
  });

  /**
   * Changes the timer `key` that exists, under its lock: what the mode does
   * to its firing in its state. Answers null if the timer is gone (retention
   * removed it meanwhile: the caller creates it).
   */
  async function change(client: string, key: string, input: PutTimerInput, at: number): Promise<{ result: PutResult; job?: FiringJob } | null> {
    return d.db.$transaction(async (tx) => {
      const cur = await findTimer(tx, client, key, true);
      if (!cur) return null;
      if (input.mode === 'keep') return { result: { status: 200, timer: cur } };
      let state = stateOf(cur);
      // A delivery may claim the pending firing meanwhile (it holds no timer
      // lock), and a fast failure hand it back PENDING: moved on a later try.
      for (let tries = 0; state === 'PENDING'; tries++) {
        if (tries === MOVE_TRIES) throw new Error(`timer ${key}: its pending firing could not be moved in ${MOVE_TRIES} tries`);
        const burst = input.mode === 'debounce' && cur.burstStartedAt ? { startedAt: cur.burstStartedAt, maxWaitMs: cur.maxWaitMs } : null;
        const p = plan(key, input, at, burst);
        if (await ownerTransitions(tx).move(cur.notificationId, p.dueAt, p.firing)) {
          await touchTimer(tx, cur.id, p.burst);
          const timer = (await findTimer(tx, client, key)) as TimerRow;
          return { result: { status: 200, timer }, job: { rowId: cur.notificationId, dueAt: p.dueAt, firing: p.firing, mode: 'upsert' } };
        }
        state = stateOf((await findTimer(tx, client, key)) as TimerRow);
      }
      if (state === 'DELIVERING' && input.mode === 'replace') throw DELIVERING(key);
      const f = newFiring(key, cur.id, plan(key, input, at, null));
      await fireAgain(tx, client, f);
      const timer = (await findTimer(tx, client, key)) as TimerRow;
      return { result: { status: 201, timer }, job: { rowId: f.rowId, dueAt: f.dueAt, firing: f.firing, mode: 'nx' } };
    });
  }

  /**
   * Schedules the jobs of committed changes, then makes sure each moved
   * firing's job is due when its row is: two changes of one timer committed
   * in one order may schedule in the other (two API processes), and the last
   * schedule would win. Each round reads the rows after its schedule and
   * schedules again those found moved since; whoever commits last schedules
   * after its commit and reads after that, so the job ends at the row's time.
   * (Redis refusing the schedule leaves it to the relay: docs/api/timers.md.)
   */
  async function scheduleSettled(jobs: readonly FiringJob[]): Promise<void> {
    let round = jobs;
    for (let i = 0; i < SETTLE_ROUNDS && round.length > 0; i++) {
      await d.schedule(round);
      const moved = round.filter((j) => j.mode === 'upsert');
      if (moved.length === 0) return;
      const now = await pendingFirings(
        d.db,
        moved.map((j) => j.rowId),
      ).catch(() => []);
      round = now
        .filter((r) => moved.some((j) => j.rowId === r.id && j.dueAt.getTime() !== r.dueAt.getTime()))
        .map((r) => ({ rowId: r.id, dueAt: r.dueAt, firing: r.firing, mode: 'upsert' as const }));
    }
  }

  /** PUT /timers/{key}: creates, or changes as the mode says. */
  async function put(client: string, key: string, input: PutTimerInput): Promise<PutResult> {
    const [r] = await putMany(client, [{ key, input }]);
    if (!r) throw new Error('putMany answered nothing');
    if ('error' in r) throw r.error;
    return r;
  }

  /**
   * Many PUTs: the timers none of which exists are created by one statement
   * (the common case of a batch), the rest changed one by one; their jobs
   * scheduled together after. An item's refusal is its own.
   */
  async function putMany(client: string, items: readonly { key: string; input: PutTimerInput }[]): Promise<(PutResult | { error: AppError })[]> {
    const at = now();
    const out: (PutResult | { error: AppError } | undefined)[] = new Array(items.length);
    const ok: { i: number; key: string; input: PutTimerInput }[] = [];
    items.forEach((it, i) => {
      try {
        checkTarget(d.allow, it.input.target);
        ok.push({ i, ...it });
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        out[i] = { error: err };
      }
    });
    // In key order: two batches creating the same keys lock them in one order (no deadlock).
    const fresh = ok
      .map((it) => newFiring(it.key, randomUUID(), plan(it.key, it.input, at, null)))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const created = await createTimers(d.db, client, fresh);
    const jobs: FiringJob[] = fresh.filter((f) => created.has(f.key)).map((f) => ({ rowId: f.rowId, dueAt: f.dueAt, firing: f.firing, mode: 'nx' }));
    await d.schedule(jobs);
    const rows = new Map((await findTimers(d.db, client, [...created])).map((r) => [r.key, r]));
    for (const it of ok) {
      if (created.has(it.key)) {
        out[it.i] = { status: 201, timer: rows.get(it.key) as TimerRow };
        continue;
      }
      try {
        let c = await change(client, it.key, it.input, at);
        // Gone between the create and the change (retention): created now.
        while (!c) {
          const f = newFiring(it.key, randomUUID(), plan(it.key, it.input, at, null));
          if ((await createTimers(d.db, client, [f])).has(it.key)) {
            c = {
              result: { status: 201, timer: (await findTimer(d.db, client, it.key)) as TimerRow },
              job: { rowId: f.rowId, dueAt: f.dueAt, firing: f.firing, mode: 'nx' },
            };
          } else c = await change(client, it.key, it.input, at);
        }
        out[it.i] = c.result;
        // Scheduled at once: a later change of the key, by this or another process, schedules after its own commit.
        if (c.job) await scheduleSettled([c.job]);
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        out[it.i] = { error: err };
      }
    }
    return out as (PutResult | { error: AppError })[];
  }

  return {
    put,
    putMany,

    async get(client: string, key: string): Promise<TimerRow> {
      const t = await findTimer(d.db, client, key);
      if (!t) throw NOT_FOUND(key);
      return t;
    },

    /** DELETE /timers/{key}: CANCELLED while pending or failed (again: the same answer); 409 while delivering or once delivered. */
    async cancel(client: string, key: string): Promise<TimerRow> {
      return d.db.$transaction(async (tx) => {
        const cur = await findTimer(tx, client, key, true);
        if (!cur) throw NOT_FOUND(key);
        const state = stateOf(cur);
        if (state === 'CANCELLED') return cur;
        if (state === 'PENDING' || state === 'FAILED') {
          if (await ownerTransitions(tx).cancel(cur.notificationId, 'cancelled by its client')) {
            await touchTimer(tx, cur.id, { startedAt: null, maxWaitMs: null });
            return (await findTimer(tx, client, key)) as TimerRow;
          }
        }
        const again = (await findTimer(tx, client, key)) as TimerRow;
        if (stateOf(again) === 'DELIVERED') throw new AppError('TIMER_DELIVERED', 409, `timer ${key} was delivered; nothing to cancel`);
        throw DELIVERING(key);
      });
    },

    list: (client: string, o: { state?: TimerState; prefix?: string; cursor?: string; limit: number }) => listTimers(d.db, client, o),
  };
}

export type TimersService = ReturnType<typeof createTimersService>;
