// Pause and resume as an operator makes them: the intended state and its
// audit row are committed to PostgreSQL first, then written to every shard in
// Redis (commit, then schedule: a Redis write that fails is repaired by the
// pause check, queue-controls.check.ts).
import type { Db } from '../../core/db.js';
import { AppError } from '../../core/errors.js';
import { redisCall } from '../../core/redis-call.js';
import type { Queue } from '../../queue/index.js';
import { type AuditRow, auditOf, recordControl } from './sql/queue-controls.js';

/** How long a resume request waits; cut short, the pause is lifted and the check moves the rest back. */
const RESUME_TIMEOUT_MS = 30_000;

/** What the admin API answers about a queue's controls. */
export type ControlsView = {
  readonly queue: string;
  readonly paused: boolean;
  readonly pausedTypes: readonly string[];
  /** Paused in some shards only (a write that did not reach every shard; the check repairs pauses). */
  readonly partial: readonly string[];
};

export type ControlChange = { readonly type?: string | undefined; readonly by: string; readonly reason?: string | undefined };

export type QueueControls = ReturnType<typeof createQueueControls>;

export function createQueueControls(deps: { readonly db: Db; readonly queues: readonly Queue[] }) {
  const byName = new Map(deps.queues.map((q) => [q.name, q]));

  function queueOf(name: string): Queue {
    const q = byName.get(name);
    if (!q) throw new AppError('QUEUE_NOT_FOUND', 404, `no queue named ${name}`);
    return q;
  }

  /** The type checked against the queue's job types before anything is written. */
  function targetOf(q: Queue, type: string | undefined): string {
    if (type === undefined) return '*';
    if (!q.types.includes(type)) throw new AppError('UNKNOWN_JOB_TYPE', 422, `queue ${q.name} has no job type "${type}"`);
    return type;
  }

  async function view(q: Queue): Promise<ControlsView> {
    const s = await redisCall(q.pauseState(), 'queue pause state');
    return { queue: q.name, paused: s.queue, pausedTypes: s.types, partial: s.partial };
  }

  async function change(name: string, paused: boolean, c: ControlChange): Promise<ControlsView & { changed: boolean }> {
    const q = queueOf(name);
    const type = targetOf(q, c.type);
    const changed = await recordControl(deps.db, { queue: q.name, type }, paused, c.by, c.reason ?? null);
    // A resume moves the parked backlog back in chunks: it may take longer than one call's bound.
    const r = await redisCall(paused ? q.pause(c.type) : q.resume(c.type), paused ? 'queue pause' : 'queue resume', paused ? undefined : RESUME_TIMEOUT_MS);
    return { ...(await view(q)), changed: changed || r.changed };
  }

  return {
    pause: (name: string, c: ControlChange) => change(name, true, c),
    resume: (name: string, c: ControlChange) => change(name, false, c),
    view: (name: string) => view(queueOf(name)),
    audit: (name: string, limit: number): Promise<AuditRow[]> => auditOf(deps.db, queueOf(name).name, limit),
  };
}
