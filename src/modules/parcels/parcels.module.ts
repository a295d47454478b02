// Wires parcel batching: the Redis batcher, its flusher (worker role), the
// reconciliation pass, repository, service and routes.
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import type { Background, ServiceModule } from '../../core/module.js';
import { createModuleQueue } from '../../core/module-queue.js';
import type { NotificationDispatch } from '../../core/outbox.js';
import { createBatchFlusher } from '../../queue/batch-flusher.js';
import { createBatcher } from '../../queue/batcher.js';
import { createParcelsRepository } from './parcels.repository.js';
import { parcelsRoutes } from './parcels.routes.js';
import { createParcelsService } from './parcels.service.js';

export const PARCELS_QUEUE = 'parcels';
export const RECONCILE_JOB = 'parcels.reconcile';
export const RECONCILE_JOB_ID = 'parcels:reconcile';

export type ParcelsModuleConfig = Pick<
  Config,
  | 'QUEUE_PREFIX'
  | 'QUEUE_SHARDS'
  | 'QUEUE_MAX_PAYLOAD_BYTES'
  | 'PARCEL_BATCH_SIZE'
  | 'PARCEL_MAX_WAIT_SECONDS'
  | 'PARCEL_RECONCILE_INTERVAL_SECONDS'
  | 'PARCEL_RECONCILE_GRACE_SECONDS'
  | 'WORKER_IDLE_RECHECK_MS'
>;

export function createParcelsModule(deps: {
  db: Db;
  /** Connections of the flusher's own, so its commits never wait behind the request or job load. Default: db. */
  flushDb?: Db;
  redis: RedisClient;
  /** Opens a new named connection, not yet connected (the flusher's own). */
  connect: (name: string) => RedisClient;
  config: ParcelsModuleConfig;
  log: Logger;
  dispatch: NotificationDispatch;
  /** Told of every committed batch (metrics). */
  onBatch?: (reason: 'FULL' | 'TIMEOUT') => void;
}) {
  const { config } = deps;
  const log = deps.log.child({ module: 'parcels' });
  const batcherOptions = {
    name: PARCELS_QUEUE,
    // The batcher's keys live beside the queue's, under the same prefix.
    prefix: `${config.QUEUE_PREFIX}b`,
    shards: config.QUEUE_SHARDS,
    batchSize: config.PARCEL_BATCH_SIZE,
    maxWaitMs: Math.round(config.PARCEL_MAX_WAIT_SECONDS * 1_000),
  };
  const batcher = createBatcher(deps.redis, batcherOptions);
  const queue = createModuleQueue(deps.redis, config, PARCELS_QUEUE, { [RECONCILE_JOB]: { maxAttempts: 1_000 } });
  const serviceOn = (db: Db) =>
    createParcelsService({
      repo: createParcelsRepository(db),
      batcher,
      dispatch: deps.dispatch,
      log,
      reconcileGraceMs: config.PARCEL_RECONCILE_GRACE_SECONDS * 1_000,
      onBatch: deps.onBatch ?? (() => {}),
    });
  const service = serviceOn(deps.db);
  const flushService = deps.flushDb ? serviceOn(deps.flushDb) : service;
  const everyMs = config.PARCEL_RECONCILE_INTERVAL_SECONDS * 1_000;
  // The flusher takes on a connection of its own: on the shared one its take would
  // queue behind every intake's command and miss the deadline under load.
  const flusherRedis = deps.connect('ots-parcel-flusher');
  const flusherBatcher = createBatcher(flusherRedis, batcherOptions);
  const flusher = createBatchFlusher({
    batcher: flusherBatcher,
    redis: flusherRedis,
    onBatch: (batches) => flushService.flushTimedOut(batches),
    log,
    idleRecheckMs: config.WORKER_IDLE_RECHECK_MS,
  });
  const background: Background[] = [
    {
      name: 'parcel-flusher',
      start: async () => {
        await flusherRedis.connect();
        await flusher.start();
      },
      stop: async () => {
        await flusher.stop();
        flusherRedis.disconnect();
      },
    },
  ];
  const module: ServiceModule & { service: typeof service; batcher: typeof batcher } = {
    name: 'parcels',
    ...httpOf(parcelsRoutes(service)),
    queue,
    handlers: {},
    // The safety net: batches parcels left waiting past the max wait (a crash between Redis and PostgreSQL).
    periodic: [{ id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs }, run: () => service.reconcile() }],
    background,
    service,
    batcher,
  };
  return module;
}
