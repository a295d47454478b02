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
import { Prisma } from '../generated/prisma/client.js';
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
  /** The table's name (a constant of the repository, never input). */
  readonly table: string;
  /** The timestamp column read in order (with `id`), through an index; rows with it before the cutoff are the range. */
  readonly key: string;
  /** More conditions of the range (over `t`), matching the index read (a status, for a partial one). */
  readonly range?: Prisma.Sql;
  /** Which rows of the range are terminal and may go (over `t`; `cutoff` is the SQL of the cutoff time). */
  readonly terminal: (cutoff: Prisma.Sql) => Prisma.Sql;
  /** What goes with them: data-modifying statements over the CTE `c` of the chosen ids. */
  readonly alsoDelete: readonly Prisma.Sql[];
};

/** The SQL of one batch: rows older than `olderThanSeconds`, `limit` of them, read after `from` (key, id). */
function purgeBatchSql(s: PurgeStatement, olderThanSeconds: number, limit: number, from: PurgeCursor): Prisma.Sql {
  const table = Prisma.raw(s.table);
  const key = Prisma.raw(`t.${s.key}`);
  const cutoff = Prisma.sql`now() - make_interval(secs => ${olderThanSeconds}::double precision)`;
  const also = s.alsoDelete.map((sql, i) => Prisma.sql`${Prisma.raw(`x${i}`)} AS (${sql}), `);
  return Prisma.sql`WITH s AS (
      SELECT t.id, ${key} AS k FROM ${table} t
       WHERE ${s.range ?? Prisma.sql`true`} AND ${key} < ${cutoff}
         AND ${key} >= ${from.at}::timestamptz AND (${key}, t.id) > (${from.at}::timestamptz, ${from.id}::uuid)
       ORDER BY ${key}, t.id LIMIT ${limit}
    ), c AS (
      SELECT t.id FROM ${table} t WHERE t.id IN (SELECT id FROM s) AND ${s.terminal(cutoff)}
       FOR UPDATE OF t SKIP LOCKED
    ), ${also.length ? Prisma.join(also, '') : Prisma.empty}d AS (
      DELETE FROM ${table} WHERE id IN (SELECT id FROM c) RETURNING 1
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
  const sql = purgeBatchSql(statement, olderThanSeconds, limit, after ?? START);
  type Row = { examined: number; deleted: number; last_at: Date | null; last_id: string | null };
  const [row] = await purgeInSnapshot(db, (tx) => tx.$queryRaw<Row[]>(sql));
  return {
    examined: row?.examined ?? 0,
    deleted: row?.deleted ?? 0,
    next: row?.last_at && row.last_id ? { at: row.last_at, id: row.last_id } : null,
  };
}

type RetentionOptions = { readonly olderThanSeconds: number; readonly batchSize: number; readonly purges: readonly Purge[] };

/** What a purge statement runs on: its snapshot's transaction. */
export type PurgeClient = Pick<Db, '$queryRaw'>;

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
          await tx.$executeRaw`SET LOCAL jit = off`;
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
