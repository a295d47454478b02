// The retention pass of a domain: a periodic job deleting terminal history
// older than RETENTION_DAYS, a batch at a time. Each batch is one short
// statement that reads the next RETENTION_BATCH_SIZE rows of an index range
// (whatever they are: a row that cannot go yet costs its place in one batch
// of a run, not a rescan by every batch) and deletes those that are terminal,
// skipping rows another transaction holds, so the hot path never waits for
// it; after each batch the pass rests as long as the batch took, so it takes
// at most about half of one database connection's time however much history
// has piled up. What is terminal, and what goes with it, is the domain's
// (its repository's purge).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config.js';
import type { Db } from './db.js';
import { isSerializationFailure } from './db-errors.js';
import type { Logger } from './logger.js';
import type { PeriodicJob } from '../queue/index.js';

export type RetentionConfig = Pick<Config, 'RETENTION_DAYS' | 'RETENTION_INTERVAL_SECONDS' | 'RETENTION_BATCH_SIZE'>;

/** Where a batch of a purge stopped reading its index: the next batch reads after it. */
export type PurgeCursor = { readonly at: Date; readonly id: string };
/** A batch of a purge: how many rows of its range it read, how many of them it deleted, where it stopped. */
export type PurgeBatch = { readonly examined: number; readonly deleted: number; readonly next: PurgeCursor | null };
/** One kind of history: reads the next `limit` rows older than `olderThanSeconds` after `after` (from the start without) and deletes the terminal ones. */
export type Purge = { readonly what: string; purge(olderThanSeconds: number, limit: number, after?: PurgeCursor | null): Promise<PurgeBatch> };

/** The statement of a purge batch, over `table` (aliased `t`, keyed by a uuid `id`). */
export type PurgeStatement = {
  readonly table: string;
  /** The timestamp column read in order (with `id`), through an index; rows with it before the cutoff are the range. */
  readonly key: string;
  /** More conditions of the range (over `t`), matching the index read (a status, for a partial one). */
  readonly range?: string;
  /** Which rows of the range are terminal and may go (over `t`; `cutoff` is the SQL of the cutoff time). */
  readonly terminal: (cutoff: string) => string;
  /** What goes with them: data-modifying statements over the CTE `c` of the chosen ids. */
  readonly alsoDelete: readonly string[];
};

/** The SQL of one batch: $1 the age in seconds, $2 the batch size, $3 and $4 the cursor (key, id) to read after. */
function purgeBatchSql(s: PurgeStatement): string {
  const cutoff = `now() - make_interval(secs => $1::double precision)`;
  return `WITH s AS (
      SELECT t.id, t.${s.key} AS k FROM ${s.table} t
       WHERE ${s.range ?? 'true'} AND t.${s.key} < ${cutoff}
         AND t.${s.key} >= $3::timestamptz AND (t.${s.key}, t.id) > ($3::timestamptz, $4::uuid)
       ORDER BY t.${s.key}, t.id LIMIT $2
    ), c AS (
      SELECT t.id FROM ${s.table} t WHERE t.id IN (SELECT id FROM s) AND ${s.terminal(cutoff)}
       FOR UPDATE OF t SKIP LOCKED
    ), ${s.alsoDelete.map((sql, i) => `x${i} AS (${sql}), `).join('')}d AS (
      DELETE FROM ${s.table} WHERE id IN (SELECT id FROM c) RETURNING 1
    )
    SELECT (SELECT count(*) FROM s)::int AS examined, (SELECT count(*) FROM d)::int AS deleted, l.k AS last_at, l.id AS last_id
      FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT k, id FROM s ORDER BY k DESC, id DESC LIMIT 1) l ON true`;
}

/** Before every row: a run's first batch reads from the start of the range. */
const START: PurgeCursor = { at: new Date(0), id: '00000000-0000-0000-0000-000000000000' };

/** The history `statement` deletes, named `what`: what a repository hands its module's retention job. */
export const purgeOf = (db: Db, what: string, statement: PurgeStatement): Purge => ({
  what,
  purge: (olderThanSeconds, limit, after) => purgeBatch(db, statement, olderThanSeconds, limit, after ?? null),
});

/** Runs one batch of `statement` after `after` in a snapshot of its own (purgeInSnapshot). */
async function purgeBatch(db: Db, statement: PurgeStatement, olderThanSeconds: number, limit: number, after: PurgeCursor | null): Promise<PurgeBatch> {
  const from = after ?? START;
  const sql = purgeBatchSql(statement);
  type Row = { examined: number; deleted: number; last_at: Date | null; last_id: string | null };
  const [row] = await purgeInSnapshot(db, (tx) => tx.$queryRawUnsafe<Row[]>(sql, olderThanSeconds, limit, from.at, from.id));
  return {
    examined: row?.examined ?? 0,
    deleted: row?.deleted ?? 0,
    next: row?.last_at && row.last_id ? { at: row.last_at, id: row.last_id } : null,
  };
}

type RetentionOptions = { readonly olderThanSeconds: number; readonly batchSize: number; readonly purges: readonly Purge[] };

/** What a purge statement runs on: its snapshot's transaction. */
export type PurgeClient = Pick<Db, '$queryRawUnsafe'>;

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
async function purgeInSnapshot<T>(db: Db, statement: (tx: PurgeClient) => Promise<T>): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await db.$transaction(
        async (tx) => {
          // The planner, guessing few rows match, prices the statement high and
          // compiles it (JIT): some 20 ms of a 50 ms batch, every batch.
          await tx.$executeRawUnsafe('SET LOCAL jit = off');
          return statement(tx);
        },
        { isolationLevel: 'RepeatableRead', maxWait: 10_000, timeout: 120_000 },
      );
    } catch (err) {
      if (i >= SNAPSHOT_TRIES || !isSerializationFailure(err)) throw err;
    }
  }
}

/** A run stops after this share of the interval and leaves the rest to the next one. */
const RUN_SHARE_OF_INTERVAL = 0.5;

/** Deletes each kind's history in batches until a batch reads the end of its range, the run's time is up or it is aborted. */
export async function runRetention(o: RetentionOptions, budgetMs: number, signal?: AbortSignal): Promise<Record<string, number>> {
  const until = Date.now() + budgetMs;
  const deleted: Record<string, number> = {};
  for (const p of o.purges) {
    let total = 0;
    let after: PurgeCursor | null = null;
    for (;;) {
      const started = Date.now();
      const batch = await p.purge(o.olderThanSeconds, o.batchSize, after);
      total += batch.deleted;
      after = batch.next;
      if (batch.examined < o.batchSize || !after || signal?.aborted || Date.now() >= until) break;
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
