// The retention pass of a domain: a periodic job deleting terminal history
// older than RETENTION_DAYS, a batch at a time. Each batch is one short
// statement that skips rows another transaction holds, so the hot path never
// waits for it; after each batch the pass rests as long as the batch took, so
// it takes at most about half of one database connection's time however much
// history has piled up. What is terminal, and what goes with it, is the
// domain's statement (its repository's purge).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config.js';
import type { Db } from './db.js';
import { isSerializationFailure } from './db-errors.js';
import type { Logger } from './logger.js';
import type { PeriodicJob } from '../queue/index.js';

export type RetentionConfig = Pick<Config, 'RETENTION_DAYS' | 'RETENTION_INTERVAL_SECONDS' | 'RETENTION_BATCH_SIZE'>;

/** One kind of history: deletes up to `limit` of its oldest terminal rows older than `olderThanSeconds` and says how many went. */
export type Purge = { readonly what: string; purge(olderThanSeconds: number, limit: number): Promise<number> };

type RetentionOptions = { readonly olderThanSeconds: number; readonly batchSize: number; readonly purges: readonly Purge[] };

/** What a purge statement runs on: its snapshot's transaction. */
export type PurgeClient = Pick<Db, '$executeRaw' | '$executeRawUnsafe'>;

/** Tries of a purge statement whose snapshot a concurrent change overtook. */
const SNAPSHOT_TRIES = 3;

/**
 * Runs a purge statement in a snapshot of its own (REPEATABLE READ): the rows
 * it checks (a subject's notifications all settled) are the rows it deletes.
 * Under READ COMMITTED its DELETE would wait for a row changed meanwhile (an
 * operator's redrive of a FAILED notification) and delete the new version
 * unchecked; here that change fails the statement, which is made again on a
 * fresh snapshot (and a row held then is skipped).
 */
export async function purgeInSnapshot(db: Db, statement: (tx: PurgeClient) => Promise<number>): Promise<number> {
  for (let i = 1; ; i++) {
    try {
      return await db.$transaction((tx) => statement(tx), { isolationLevel: 'RepeatableRead', maxWait: 10_000, timeout: 120_000 });
    } catch (err) {
      if (i >= SNAPSHOT_TRIES || !isSerializationFailure(err)) throw err;
    }
  }
}

/** A run stops after this share of the interval and leaves the rest to the next one. */
const RUN_SHARE_OF_INTERVAL = 0.5;

/** Deletes each kind's history in batches until a batch comes back short, the run's time is up or it is aborted. */
export async function runRetention(o: RetentionOptions, budgetMs: number, signal?: AbortSignal): Promise<Record<string, number>> {
  const until = Date.now() + budgetMs;
  const deleted: Record<string, number> = {};
  for (const p of o.purges) {
    let total = 0;
    for (;;) {
      const started = Date.now();
      const n = await p.purge(o.olderThanSeconds, o.batchSize);
      total += n;
      if (n < o.batchSize || signal?.aborted || Date.now() >= until) break;
      await sleep(Date.now() - started, undefined, { signal }).catch(() => {});
      if (signal?.aborted) break;
    }
    deleted[p.what] = total;
  }
  return deleted;
}

/**
 * The domain's retention job (`<domain>.retention`). It exists with
 * RETENTION_DAYS unset too, and then deletes nothing: a periodic job left in
 * Redis by an earlier run with retention on always finds its handler.
 */
export function createRetentionJob(domain: string, purges: readonly Purge[], config: RetentionConfig, log: Logger): PeriodicJob {
  const everyMs = config.RETENTION_INTERVAL_SECONDS * 1_000;
  const budgetMs = everyMs * RUN_SHARE_OF_INTERVAL;
  const days = config.RETENTION_DAYS;
  return {
    id: `${domain}:retention`,
    type: retentionJobType(domain),
    schedule: { everyMs },
    maxRunMs: budgetMs + 60_000,
    run: async ({ signal }) => {
      if (days === undefined) return {};
      const deleted = await runRetention({ olderThanSeconds: days * 86_400, batchSize: config.RETENTION_BATCH_SIZE, purges }, budgetMs, signal);
      if (Object.values(deleted).some((n) => n > 0)) log.info({ deleted, days }, 'retention deleted history');
      return deleted;
    },
  };
}

/** The job type of a domain's retention job, to register on its queue. */
export const retentionJobType = (domain: string): string => `${domain}.retention`;
