// An operator's redrive of dead jobs, the one way the admin API (and the tests
// standing in for an operator) makes it: the queue's module first records the
// redrive in its database (ServiceModule.beforeRedrive: a FAILED notification
// may be called again only then), then the queue moves the jobs back.
import type { JobInfo, Queue } from '../../queue/index.js';

export type BeforeRedrive = (jobIds: readonly string[]) => Promise<void>;
/** How each Redis call is made (the admin API bounds each one in time). */
export type RedisCall = <T>(call: () => Promise<T>) => Promise<T>;
const direct: RedisCall = (call) => call();

/** Redrives one job if it is dead (recorded first); false when it is not dead. */
export async function redriveOne(queue: Queue, before: BeforeRedrive | undefined, id: string, redis: RedisCall = direct): Promise<boolean> {
  // Recorded only for a dead job: a redrive asked for a job that came back by itself must not let it call again.
  if ((await redis(() => queue.get(id)))?.state !== 'dead') return false;
  await before?.([id]);
  return redis(() => queue.redrive(id));
}

/**
 * Redrives the oldest dead jobs: at most `max` per shard in one script each,
 * or, for a queue whose module records redrives, `max` in all, named first so
 * exactly those are recorded.
 */
export async function redriveOldest(queue: Queue, before: BeforeRedrive | undefined, max: number, redis: RedisCall = direct): Promise<number> {
  if (!before) return redis(() => queue.redriveAll(max));
  const ids: string[] = [];
  for (let cursor: string | null = null; ids.length < max;) {
    const from = cursor;
    const page: { jobs: JobInfo[]; next: string | null } = await redis(() => queue.listDead(from, Math.min(500, max - ids.length)));
    ids.push(...page.jobs.map((j) => j.id));
    if (!page.next) break;
    cursor = page.next;
  }
  await before(ids);
  let redriven = 0;
  for (const id of ids) if (await redis(() => queue.redrive(id))) redriven++;
  return redriven;
}
