// An operator's redrive of dead jobs, the one way the admin API (and the tests
// standing in for an operator) makes it: the queue's module first records the
// redrive in its database (ServiceModule.redrives: a FAILED notification may be
// called again only then), then the queue moves the jobs back, and the record
// is undone for every job not moved (not dead any more, or Redis failed): a
// record without its redrive would let a job that comes back by itself call.
import type { RedriveRecord } from '../../core/module.js';
import type { JobInfo, Queue } from '../../queue/index.js';

export type { RedriveRecord };
/** How each Redis call is made (the admin API bounds each one in time). */
export type RedisCall = <T>(call: () => Promise<T>) => Promise<T>;
const direct: RedisCall = (call) => call();

/** Redrives one job if it is dead (recorded first); false when it is not dead. */
export async function redriveOne(queue: Queue, rec: RedriveRecord | undefined, id: string, redis: RedisCall = direct): Promise<boolean> {
  // Recorded only for a dead job: a redrive asked for a job that came back by itself must not let it call again.
  if ((await redis(() => queue.get(id)))?.state !== 'dead') return false;
  await rec?.record([id]);
  let moved = false;
  try {
    moved = await redis(() => queue.redrive(id));
    return moved;
  } finally {
    if (!moved) await rec?.undo([id]);
  }
}

/**
 * Redrives the oldest dead jobs: at most `max` per shard in one script each,
 * or, for a queue whose module records redrives, `max` in all, named first so
 * exactly those are recorded.
 */
export async function redriveOldest(queue: Queue, rec: RedriveRecord | undefined, max: number, redis: RedisCall = direct): Promise<number> {
  if (!rec) return redis(() => queue.redriveAll(max));
  const ids: string[] = [];
  for (let cursor: string | null = null; ids.length < max;) {
    const from = cursor;
    const page: { jobs: JobInfo[]; next: string | null } = await redis(() => queue.listDead(from, Math.min(500, max - ids.length)));
    ids.push(...page.jobs.map((j) => j.id));
    if (!page.next) break;
    cursor = page.next;
  }
  await rec.record(ids);
  const left = new Set(ids);
  try {
    for (const id of ids) if (await redis(() => queue.redrive(id))) left.delete(id);
  } finally {
    if (left.size > 0) await rec.undo([...left]);
  }
  return ids.length - left.size;
}
