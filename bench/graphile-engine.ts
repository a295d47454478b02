// graphile-worker (jobs in PostgreSQL) behind the benchmark's BenchQueue
// shape, with the settings of its performance page
// (https://worker.graphile.org/docs/performance): addJobs for bulk adds, a
// local queue of 500 jobs fetched at once, completions and failures batched
// (completeJobBatchDelay / failJobBatchDelay 0), and the pool its options
// recommend, the larger of 10 and the concurrency + 2 (several worker
// processes share 80 connections, inside PostgreSQL's default 100). The pool
// is connected before the worker starts, as the other engines' connections
// are; run() itself (a migration check, LISTEN) is inside the timed start.
// Jobs due later are found by polling: 100 ms here instead of its 2 s
// default, the setting a team timing jobs would choose. A finished job is
// deleted, as graphile-worker does. Each queue has a schema of its own,
// dropped afterwards.
import { EventEmitter } from 'node:events';
import { Logger, type Runner, type WorkerEvents, type WorkerUtils, makeWorkerUtils, run, runMigrations } from 'graphile-worker';
import pg from 'pg';
import { type BenchQueue, type QueueIds, type WorkerHooks } from './bench-engine.js';
import { PAYLOAD } from './bench-util.js';
import { dropSchema, ensureDatabase, schemaSql, schemaStorage } from './pg-util.js';

const LOCAL_QUEUE = 500;
const POLL_MS = 100;
/** Connections the worker processes of one scenario share at most. */
const SHARED_CONNECTIONS = 80;

/** The payload, with the intended due time when the lateness scenario needs it. */
type Data = typeof PAYLOAD & { d?: number };

/** Errors and warnings only: logging every job would cost it time the others do not spend. */
const quiet = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') process.stderr.write(`graphile-worker ${level}: ${message}\n`);
});

export function openGraphile(databaseUrl: string, ids: QueueIds): BenchQueue {
  const schema = ids.prefix;
  const admin = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  let utils: WorkerUtils | undefined;
  const runners: Runner[] = [];
  const pools: pg.Pool[] = [];
  const add = (specs: { payload: Data; runAt?: Date }[]) => {
    if (!utils) throw new Error('graphile engine: init() first');
    return utils.addJobs(specs.map((s) => ({ identifier: ids.name, ...s })));
  };

  async function prepareWorker(concurrency: number, hooks: WorkerHooks, processes = 1) {
    const { onStart, onCompleted } = hooks;
    const max = Math.min(Math.max(10, concurrency + 2), Math.floor(SHARED_CONNECTIONS / processes));
    const pool = new pg.Pool({ connectionString: databaseUrl, max });
    pool.on('error', (err) => process.stderr.write(`graphile-worker pool error: ${err.message}\n`));
    pools.push(pool);
    await Promise.all(Array.from({ length: Math.min(max, 4) }, () => pool.query('select 1')));
    const events: WorkerEvents = new EventEmitter();
    if (onCompleted) events.on('job:success', () => onCompleted());
    let runner: Runner | undefined;
    return {
      async start() {
        runner = await run({
          pgPool: pool,
          events,
          schema,
          concurrency,
          pollInterval: POLL_MS,
          noHandleSignals: true,
          logger: quiet,
          taskList: {
            [ids.name]: async (payload) => {
              const d = (payload as Data).d;
              if (d !== undefined) onStart?.(Date.now() - d);
            },
          },
          preset: {
            worker: {
              maxPoolSize: max,
              localQueue: { size: LOCAL_QUEUE },
              completeJobBatchDelay: 0,
              failJobBatchDelay: 0,
            },
          },
        });
        runners.push(runner);
      },
      async stop() {
        await runner?.stop();
      },
    };
  }

  return {
    ids,
    store: 'postgres',
    async init() {
      await ensureDatabase(databaseUrl);
      await runMigrations({ connectionString: databaseUrl, schema, logger: quiet });
      utils = await makeWorkerUtils({ connectionString: databaseUrl, schema, logger: quiet });
    },
    storage: () => schemaStorage(admin, schema),
    async addDelayed(jobs) {
      const now = Date.now();
      await add(jobs.map((j) => ({ payload: PAYLOAD, runAt: new Date(now + j.delayMs) })));
    },
    async addAt(jobs) {
      await add(jobs.map((j) => ({ payload: { ...PAYLOAD, d: j.dueAt }, runAt: new Date(j.dueAt) })));
    },
    async addDue(ns) {
      await add(ns.map(() => ({ payload: PAYLOAD })));
    },
    async counts() {
      const r = await admin.query<{ waiting: number; active: number }>(
        `select count(*) filter (where locked_at is null)::int as waiting, count(*) filter (where locked_at is not null)::int as active
           from ${schemaSql(schema)}._private_jobs`,
      );
      return r.rows[0] ?? { waiting: 0, active: 0 };
    },
    prepareWorker,
    drop: () => dropSchema(databaseUrl, schema),
    async close() {
      await Promise.all(runners.map((r) => r.stop().catch(() => {})));
      await utils?.release();
      await Promise.all(pools.map((p) => p.end()));
      await admin.end();
    },
  };
}
