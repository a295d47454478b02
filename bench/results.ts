// The shape of one benchmark run's results, as printed (JSON) and tabled (markdown).
import type { EngineName } from './bench-config.js';
import type { LatenessResult } from './lateness.js';
import type { ClaimResult, EnqueueResult, MemoryResult } from './throughput.js';

export type Failed = { error: string };
export type EngineResults = {
  enqueue?: EnqueueResult | Failed;
  memory?: MemoryResult | Failed;
  /** memory with the jobs of ten priorities (ours and BullMQ). */
  memoryctl?: MemoryResult | Failed;
  claim1?: ClaimResult | Failed;
  claim50?: ClaimResult | Failed;
  /** claim50 with priorities in use and a rate limit far above the load (ours and BullMQ). */
  claim50ctl?: ClaimResult | Failed;
  lateness1?: LatenessResult | Failed;
  lateness4?: LatenessResult | Failed;
};
export type RunResults = Partial<Record<EngineName, EngineResults>>;

export type RunMeta = {
  date: string;
  scale: number;
  runTag: string;
  machine: { cpu: string; cores: number; memoryGiB: number; os: string };
  node: string;
  redis: string;
  postgres: string;
  bullmq: string;
  pgBoss: string;
  graphileWorker: string;
  ioredis: string;
  counts: { enqueue: number; enqueueInFlight: number; claim: number; lateness: number; latenessWindowMs: number };
};
