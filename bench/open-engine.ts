// Opens a benchmark queue of any engine by name (used by the runner and by
// the child worker processes).
import type { BenchQueue, BenchStores, QueueIds } from './bench-engine.js';
import { openBullmq } from './bullmq-engine.js';
import { openGraphile } from './graphile-engine.js';
import { openOurs } from './ours-engine.js';
import { openPgBoss } from './pgboss-engine.js';
import { schemaName } from './pg-util.js';

/** `controls`: jobs of ten priorities and a rate limit far above the load (ours and BullMQ only). */
export function openEngine(stores: BenchStores, ids: QueueIds, controls = false): BenchQueue {
  switch (ids.engine) {
    case 'ours':
      return openOurs(stores.redisUrl, ids, controls);
    case 'bullmq':
      return openBullmq(stores.redisUrl, ids, controls);
    case 'pgboss':
      return openPgBoss(stores.databaseUrl, ids);
    case 'graphile':
      return openGraphile(stores.databaseUrl, ids);
  }
}

/** Unique, disjoint key space (or schema) per (run, scenario, engine). */
export function queueIds(engine: QueueIds['engine'], runTag: string, scenario: string): QueueIds {
  switch (engine) {
    case 'ours':
      return { engine, name: `${runTag}-${scenario}`, prefix: 'dq' };
    case 'bullmq':
      return { engine, name: scenario, prefix: runTag };
    case 'pgboss':
    case 'graphile':
      return { engine, name: 'noop', prefix: schemaName(`${runTag}_${engine}`, scenario) };
  }
}
