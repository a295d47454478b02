// pg-boss (jobs in PostgreSQL) behind the benchmark's BenchQueue shape, with
// its documented fastest settings: insert() for bulk adds; a worker fetching
// batches of 100 (`batchSize`) and fetching again at once while batches come
// back full (`burstWhenBatchFull`), `localConcurrency` fetch loops for the
// concurrency, and its shortest poll interval (0.5 s, its minimum) for jobs
// that fall due later. Completed jobs stay in its table, as pg-boss keeps
// them (its default retention); counts read the pending and active ones.
// Each queue has a schema of its own, dropped afterwards.
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { type BenchQueue, type QueueIds, type WorkerHooks } from './bench-engine.js';
import { PAYLOAD } from './bench-util.js';
import { dropSchema, ensureDatabase, schemaSql, schemaStorage } from './pg-util.js';

const BATCH = 100;
const POLL_SECONDS = 0.5;

/** The payload, with the intended due time when the lateness scenario needs it. */
type Data = typeof PAYLOAD & { d?: number };

export function openPgBoss(databaseUrl: string, ids: QueueIds): BenchQueue {
  const schema = ids.prefix;
  // Maintenance and cron off: the benchmark measures jobs, not housekeeping.
  // Its default pool (10): five processes of the lateness scenario stay well
  // inside PostgreSQL's default 100 connections.
  // Telemetry and instance registration off: work the others do not do.
  const boss = new PgBoss({
    connectionString: databaseUrl,
    schema,
    supervise: false,
    schedule: false,
    registerInstance: false,
    openTelemetry: { enabled: false },
  });
  boss.on('error', (err: unknown) => process.stderr.write(`pg-boss error: ${err instanceof Error ? err.message : JSON.stringify(err)}\n`));
  const admin = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const at = (ms: number) => new Date(ms);

  async function prepareWorker(concurrency: number, hooks: WorkerHooks) {
    const { onStart, onCompleted } = hooks;
    return {
      async start() {
        await boss.work<Data>(
          ids.name,
          { batchSize: BATCH, burstWhenBatchFull: true, localConcurrency: concurrency, pollingIntervalSeconds: POLL_SECONDS },
          async (jobs) => {
            // One job at a time within a batch: `localConcurrency` fetch loops give the concurrency.
            for (const job of jobs) {
              if (job.data.d !== undefined) onStart?.(Date.now() - job.data.d);
            }
            // pg-boss completes the whole batch when this resolves (after this
            // count: "handlers done"); the drain check waits for the completion.
            if (onCompleted) for (let i = 0; i < jobs.length; i++) onCompleted();
          },
        );
      },
      stop: () => boss.offWork(ids.name, { wait: true }),
    };
  }

  return {
    ids,
    store: 'postgres',
    async init() {
      await ensureDatabase(databaseUrl);
      await boss.start();
      if (!(await boss.getQueue(ids.name))) await boss.createQueue(ids.name);
    },
    storage: () => schemaStorage(admin, schema),
    async addDelayed(jobs) {
      const now = Date.now();
      await boss.insert(
        ids.name,
        jobs.map((j) => ({ data: PAYLOAD, startAfter: at(now + j.delayMs) })),
      );
    },
    async addAt(jobs) {
      await boss.insert(
        ids.name,
        jobs.map((j) => ({ data: { ...PAYLOAD, d: j.dueAt }, startAfter: at(j.dueAt) })),
      );
    },
    async addDue(ns) {
      await boss.insert(
        ids.name,
        ns.map(() => ({ data: PAYLOAD })),
      );
    },
    async counts() {
      const r = await admin.query<{ waiting: number; active: number }>(
        `select count(*) filter (where state in ('created', 'retry'))::int as waiting,
                count(*) filter (where state = 'active')::int as active
           from ${schemaSql(schema)}.job where name = $1 and state < 'completed'`,
        [ids.name],
      );
      return r.rows[0] ?? { waiting: 0, active: 0 };
    },
    prepareWorker,
    drop: () => dropSchema(databaseUrl, schema),
    async close() {
      await boss.stop({ graceful: true, timeout: 10_000 });
      await admin.end();
    },
  };
}
