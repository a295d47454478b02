// Opens a benchmark queue of either engine by name (used by the runner and
// by the child worker processes).
import type { BenchQueue, QueueIds } from './bench-engine.js';
import { openBullmq } from './bullmq-engine.js';
import { openOurs } from './ours-engine.js';

export function openEngine(redisUrl: string, ids: QueueIds): BenchQueue {
  return ids.engine === 'ours' ? openOurs(redisUrl, ids) : openBullmq(redisUrl, ids);
}

/** Unique, disjoint key space per (run, scenario, engine). */
export function queueIds(engine: QueueIds['engine'], runTag: string, scenario: string): QueueIds {
  return engine === 'ours' ? { engine, name: `${runTag}-${scenario}`, prefix: 'dq' } : { engine, name: scenario, prefix: runTag };
}
