// The pause check: every few seconds, compares the pauses PostgreSQL intends
// (queue_controls) with what every Redis shard holds, and makes Redis follow
// PostgreSQL, logged and audited (REAPPLY): a pause Redis lost (a restart
// without the write, a failover to a replica that lagged) is re-applied, as a
// lost pause would let an incident's jobs run; a pause found in Redis only is
// a resume Redis lost (every pause is committed to PostgreSQL first) and is
// lifted, or the queue would stay stopped for good. Parked jobs of types no
// longer paused (a resume cut short) are moved back to due.
import type { Db } from '../../core/db.js';
import type { Logger } from '../../core/logger.js';
import type { PauseState, Queue } from '../../queue/index.js';
import { type Sql, asTheOnlyChecker, pausedTargets, recordReapplied } from './sql/queue-controls.js';

/** How often the check runs (ms): a lost pause is re-applied within about this long. */
export const PAUSE_CHECK_EVERY_MS = 5_000;
/** A pass longer than this is cut off (its transaction rolled back; the next pass starts over). */
const PASS_LIMIT_MS = 60_000;

export type PauseCheck = {
  start(): void;
  /** Stops the loop; resolves when no pass is running. */
  stop(): Promise<void>;
  /**
   * One pass (tests and the loop); returns the targets whose state was
   * re-applied (`queue/type`, `:resume` for a lifted pause), or null when
   * another process was checking.
   */
  runOnce(): Promise<{ reapplied: string[] } | null>;
};

export function createPauseCheck(o: { db: Db; queues: readonly Queue[]; log: Logger; everyMs?: number }): PauseCheck {
  const everyMs = o.everyMs ?? PAUSE_CHECK_EVERY_MS;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;

  async function checkQueue(db: Sql, q: Queue, s: PauseState, intended: readonly string[], reapplied: string[]): Promise<void> {
    const held = new Set([...(s.queue ? ['*'] : []), ...s.types]);
    const target = (type: string) => (type === '*' ? undefined : type);
    for (const type of intended) {
      if (held.has(type)) continue;
      // Also a pause held by some shards only: one that lost it still claims.
      o.log.warn({ queue: q.name, type }, 'queue pause lost in Redis (restart without the write?); re-applying it');
      await recordReapplied(db, { queue: q.name, type }, 'pause missing in Redis');
      await q.pause(target(type));
      reapplied.push(`${q.name}/${type}`);
    }
    for (const type of new Set([...held, ...s.partial])) {
      if (intended.includes(type)) continue;
      if (type !== '*' && !q.types.includes(type)) {
        // A type this build does not declare (renamed, or paused by another build): nothing here can resume it.
        o.log.warn({ queue: q.name, type }, 'queue paused in Redis for a job type this build does not know; left as it is');
        continue;
      }
      // Read again just before lifting: an operator's pause made since the
      // first read must not be undone on the strength of that read.
      if ((await pausedTargets(db)).some((r) => r.queue === q.name && r.type === type)) continue;
      o.log.warn({ queue: q.name, type }, 'queue paused in Redis but not in queue_controls (a resume Redis lost?); lifting it');
      await recordReapplied(db, { queue: q.name, type }, 'resume missing in Redis');
      await q.resume(target(type));
      reapplied.push(`${q.name}/${type}:resume`);
    }
    await q.unparkResumed();
  }

  async function pass(db: Sql): Promise<{ reapplied: string[] }> {
    // Redis first, then PostgreSQL: an operator commits to PostgreSQL before
    // Redis, so a change made between the two reads shows in the second, and
    // the check then only writes what the operator is writing anyway. (Read
    // the other way round, a pause made between them would look like Redis
    // only and be lifted.) A change made while the check writes may be
    // overwritten; the next pass puts PostgreSQL's state back.
    const states = await Promise.all(o.queues.map((q) => q.pauseState()));
    const rows = await pausedTargets(db);
    const reapplied: string[] = [];
    for (const [i, q] of o.queues.entries()) {
      const intended = rows.filter((r) => r.queue === q.name && (r.type === '*' || q.types.includes(r.type))).map((r) => r.type);
      try {
        await checkQueue(db, q, states[i] as PauseState, intended, reapplied);
      } catch (err) {
        // One queue's failure must not keep the check from the others.
        o.log.error({ err, queue: q.name }, 'queue pause check failed for this queue; next pass tries again');
      }
    }
    return { reapplied };
  }

  const runOnce = () => asTheOnlyChecker(o.db, PASS_LIMIT_MS, pass);

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      running = runOnce()
        .catch((err: unknown) => o.log.error({ err }, 'pause check failed; trying again at the next pass'))
        .finally(schedule);
    }, everyMs);
    timer.unref();
  }

  return {
    start: schedule,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
    runOnce,
  };
}
