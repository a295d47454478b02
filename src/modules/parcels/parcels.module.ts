// Wires parcel batching: the Redis batcher, its flusher (worker role), the
// reconciliation pass, repository, service and routes.
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import type { Background, ServiceModule } from '../../core/module.js';
import { PERIODIC_JOB_OPTIONS, type QueueConfig, createModuleQueue } from '../../core/module-queue.js';
import { type RetentionConfig, createRetentionJob, retentionJobType } from '../../core/retention.js';
import { RECONCILE_JOB, createParcelsReconcile } from './parcels.reconcile.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import { batcherPrefix, createBatcher, createBatchFlusher } from '../../queue/index.js';
import { createParcelsRepository } from './parcels.repository.js';
import { parcelsRoutes } from './parcels.routes.js';
import { createParcelsService } from './parcels.service.js';

export const PARCELS_QUEUE = 'parcels';

export type ParcelsModuleConfig = QueueConfig &
  RetentionConfig &
  Pick<
    Config,
    | 'PARCEL_BATCH_SIZE'
    | 'PARCEL_MAX_WAIT_SECONDS'
    | 'PARCEL_RECONCILE_INTERVAL_SECONDS'
    | 'PARCEL_RECONCILE_GRACE_SECONDS'
    | 'WORKER_IDLE_RECHECK_MS'
    | 'PHONE_DEFAULT_REGION'
  >;

export function createParcelsModule(deps: {
  db: Db;
  /** Connections of the flusher's own, so its commits never wait behind the request or job load. Default: db. */
  flushDb?: Db;
  redis: RedisClient;
  /** Opens a new named connection and resolves once it is ready (the flusher's own, in the worker role). */
  connect: (name: string) => Promise<RedisClient>;
  config: ParcelsModuleConfig;
  log: Logger;
  dispatch: NotificationDispatch;
  /** Told of every committed batch (metrics). */
  onBatch?: (reason: 'FULL' | 'TIMEOUT' | 'MANUAL') => void;
}) {
  const { config } = deps;
  const log = deps.log.child({ module: 'parcels' });
  const batcherOptions = {
    name: PARCELS_QUEUE,
    // The batcher's keys live beside the queue's.
    prefix: batcherPrefix(config.QUEUE_PREFIX),
    shards: config.QUEUE_SHARDS,
    batchSize: config.PARCEL_BATCH_SIZE,
    maxWaitMs: Math.round(config.PARCEL_MAX_WAIT_SECONDS * 1_000),
  };
  const batcher = createBatcher(deps.redis, batcherOptions);
  const queue = createModuleQueue(deps.redis, config, PARCELS_QUEUE, {
    [RECONCILE_JOB]: PERIODIC_JOB_OPTIONS,
    [retentionJobType(PARCELS_QUEUE)]: PERIODIC_JOB_OPTIONS,
  });
  const serviceOn = (db: Db) =>
    createParcelsService({
      repo: createParcelsRepository(db),
      batcher,
      dispatch: deps.dispatch,
      log,
      onBatch: deps.onBatch ?? (() => {}),
      phoneRegion: config.PHONE_DEFAULT_REGION,
    });
  const service = serviceOn(deps.db);
  const flushService = deps.flushDb ? serviceOn(deps.flushDb) : service;
  const repo = createParcelsRepository(deps.db);
  const reconcile = createParcelsReconcile({
    repo,
    service,
    batcher,
    log,
    graceMs: config.PARCEL_RECONCILE_GRACE_SECONDS * 1_000,
    everyMs: config.PARCEL_RECONCILE_INTERVAL_SECONDS * 1_000,
  });
  // The flusher takes on a connection of its own: on the shared one its take would
  // queue behind every intake's command and miss the deadline under load.
  let running: { redis: RedisClient; flusher: ReturnType<typeof createBatchFlusher> } | null = null;
  const background: Background[] = [
    {
      name: 'parcel-flusher',
      start: async () => {
        const redis = await deps.connect('ots-parcel-flusher');
        const flusher = createBatchFlusher({
          batcher: createBatcher(redis, batcherOptions),
          redis,
          onBatch: (batches) => flushService.flushTimedOut(batches),
          log,
          idleRecheckMs: config.WORKER_IDLE_RECHECK_MS,
        });
        running = { redis, flusher };
        await flusher.start();
      },
      stop: async () => {
        await running?.flusher.stop();
        running?.redis.disconnect();
      },
    },
  ];
  const retention = createRetentionJob(PARCELS_QUEUE, repo.retention, config, log);
  const module: ServiceModule & { service: typeof service; batcher: typeof batcher; reconcile: typeof reconcile } = {
    name: 'parcels',
    ...httpOf(parcelsRoutes(service)),
    queue,
    handlers: {},
    periodic: [reconcile.job, retention],
    background,
    service,
    batcher,
    reconcile,
  };
  return module;
}
