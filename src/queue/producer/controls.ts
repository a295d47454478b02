// Pause and resume of a queue or of one of its job types (lua/lib/pause.lua):
// written to every shard, read back per shard, and the repair of a resume cut
// short (parked jobs left behind a lifted pause).
import { QueueErrorCode, QueueInputError } from '../errors.js';
import { type ShardKeys } from '../keys.js';
import { readPaused, runPause, runResume } from '../scripts/admin-scripts.js';
import type { QueueSetup } from './queue-options.js';

/** The whole queue ('*'), or one of its job types. */
export const WHOLE_QUEUE = '*';

/** Parked jobs moved back per script call: a large backlog never holds Redis for long. */
const RESUME_CHUNK = 500;

export type PauseState = {
  /** The whole queue is paused in every shard. */
  readonly queue: boolean;
  /** Job types paused in every shard. */
  readonly types: readonly string[];
  /** Targets ('*' or a type) paused in some shards only: a pause or resume that did not reach them all. */
  readonly partial: readonly string[];
};

export function createControls(q: QueueSetup) {
  const { redis, keys, layout } = q;

  function targetOf(type: string | undefined): string {
    if (type === undefined) return WHOLE_QUEUE;
    if (!Object.hasOwn(q.types, type)) throw new QueueInputError(QueueErrorCode.UNKNOWN_JOB_TYPE, `queue ${q.name} has no job type "${type}"`);
    return type;
  }

  /** Pauses every shard; `changed` when some shard was not paused yet (idempotent). */
  async function pause(type?: string): Promise<{ changed: boolean }> {
    const target = targetOf(type);
    // Read now, not up to a second old: a change of the shard count that
    // began meanwhile adds shards this pause must reach too.
    await layout.fresh(true);
    const r = await Promise.all(keys.map((k) => runPause(redis, k, target)));
    return { changed: r.some((x) => x.created) };
  }

  /** Moves a shard's parked jobs of `target` back to due, chunk by chunk; the first call lifts the pause when `unpause`. */
  async function drainShard(k: ShardKeys, target: string, unpause: boolean): Promise<{ wasPaused: boolean; moved: number }> {
    let r = await runResume(redis, k, target, unpause, RESUME_CHUNK);
    const wasPaused = r.wasPaused;
    let moved = r.moved;
    while (r.left > 0 && r.moved > 0) {
      r = await runResume(redis, k, target, false, RESUME_CHUNK);
      moved += r.moved;
    }
    return { wasPaused, moved };
  }

  /** Lifts the pause in every shard and moves its parked jobs back to due in due order; `changed` when some shard was paused. */
  async function resume(type?: string): Promise<{ changed: boolean; moved: number }> {
    const target = targetOf(type);
    await layout.fresh(true); // as pause
    const r = await Promise.all(keys.map((k) => drainShard(k, target, true)));
    return { changed: r.some((x) => x.wasPaused), moved: r.reduce((a, x) => a + x.moved, 0) };
  }

  /** The pause state of every shard, and what every shard agrees on. */
  async function pauseState(): Promise<PauseState> {
    await layout.fresh(); // every shard of the stored count, which a reshard may have raised past the configured one
    const per = await Promise.all(keys.map((k) => readPaused(redis, k)));
    const count = new Map<string, number>();
    for (const s of per) for (const f of Object.keys(s)) count.set(f, (count.get(f) ?? 0) + 1);
    const all = [...count].filter(([, n]) => n === keys.length).map(([f]) => f);
    return {
      queue: all.includes(WHOLE_QUEUE),
      types: all.filter((f) => f !== WHOLE_QUEUE).sort(),
      partial: [...count]
        .filter(([, n]) => n < keys.length)
        .map(([f]) => f)
        .sort(),
    };
  }

  /**
   * Parked jobs of types not paused go back to due (a resume cut short by a
   * crash between its calls); returns how many moved. Types still paused are
   * left alone by the script itself.
   */
  async function unparkResumed(): Promise<number> {
    let moved = 0;
    for (const type of Object.keys(q.types)) {
      for (const k of keys) moved += (await drainShard(k, type, false)).moved;
    }
    return moved;
  }

  return { pause, resume, pauseState, unparkResumed };
}
