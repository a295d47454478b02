// Waits until the system has nothing left to do before the invariants are
// read: no order still UNPAID, no booked appointment without the reminder of
// its slot, no WAITING parcel, no PENDING or SENDING notification, and in Redis no job
// due or in flight and no parcel group waiting (the periodic passes aside).
import type { Redis } from 'ioredis';
import type { Db } from '../../src/core/db.js';
import { RECONCILE_JOB_ID as APPOINTMENTS_RECONCILE } from '../../src/modules/appointments/appointments.reconcile.js';
import { APPOINTMENTS_QUEUE } from '../../src/modules/appointments/appointments.module.js';
import { RELAY_JOB_ID } from '../../src/modules/notifications/notifications.reconcile.js';
import { NOTIFICATIONS_QUEUE } from '../../src/modules/notifications/notifications.module.js';
import { RECONCILE_JOB_ID as ORDERS_RECONCILE } from '../../src/modules/orders/orders.reconcile.js';
import { ORDERS_QUEUE } from '../../src/modules/orders/orders.module.js';
import { PARCELS_QUEUE } from '../../src/modules/parcels/parcels.module.js';
import { RECONCILE_JOB_ID as PARCELS_RECONCILE } from '../../src/modules/parcels/parcels.reconcile.js';
import { batcherKeys, batcherPrefix, shardKeys } from '../../src/queue/keys.js';
import { sleep } from '../helpers/redis.js';
import { dueIds } from '../helpers/due-index.js';

const QUEUES = [ORDERS_QUEUE, APPOINTMENTS_QUEUE, PARCELS_QUEUE, NOTIFICATIONS_QUEUE];
// The periodic passes always have a pending (sometimes a running) occurrence.
const PERIODIC = new Set([ORDERS_RECONCILE, APPOINTMENTS_RECONCILE, PARCELS_RECONCILE, RELAY_JOB_ID]);

export type Backlog = {
  unpaid: number;
  unreminded: number;
  waitingParcels: number;
  /** PENDING, or SENDING: a call in progress, or one whose worker died and whose job waits to take it over. */
  unsettledNotifications: number;
  jobsDue: number;
  jobsInFlight: number;
  /** Dead jobs never run again: not waited for, reported (the invariants show what they cost). */
  jobsDead: number;
  parcelGroups: number;
};

async function count(db: Db, sql: string): Promise<number> {
  const [row] = await db.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM ${sql}`);
  return row?.n ?? 0;
}

/** Ids of the jobs in flight (leased to a worker), the periodic passes aside. */
export async function jobsInFlight(redis: Redis, prefix: string): Promise<string[]> {
  const ids = await Promise.all(QUEUES.map((q) => redis.zrange(shardKeys(prefix, q, 0).inflight, 0, -1)));
  return ids.flat().filter((id) => !PERIODIC.has(id));
}

/** What is left to do. Single-shard queues (QUEUE_SHARDS=1), as the scenarios run them. */
export async function backlog(db: Db, redis: Redis, prefix: string): Promise<Backlog> {
  const now = Date.now();
  const b: Backlog = {
    unpaid: await count(db, `orders WHERE status = 'UNPAID'`),
    unreminded: await count(
      db,
      `appointments a WHERE a.status = 'BOOKED' AND NOT EXISTS (
         SELECT 1 FROM notifications n
          WHERE n.dedupe_key = 'appointment-reminder:' || a.id || ':' || floor(extract(epoch FROM a.starts_at) * 1000)::bigint)`,
    ),
    waitingParcels: await count(db, `parcels WHERE status = 'WAITING'`),
    unsettledNotifications: await count(db, `notifications WHERE status IN ('PENDING', 'SENDING')`),
    jobsDue: 0,
    jobsInFlight: 0,
    jobsDead: 0,
    parcelGroups: await redis.zcard(batcherKeys(batcherPrefix(prefix), PARCELS_QUEUE, 0).groups),
  };
  b.jobsInFlight = (await jobsInFlight(redis, prefix)).length;
  for (const q of QUEUES) {
    const k = shardKeys(prefix, q, 0);
    const [due, dead] = await Promise.all([dueIds(redis, k, now), redis.zcard(k.dead)]);
    b.jobsDue += due.filter((id) => !PERIODIC.has(id)).length;
    b.jobsDead += dead;
  }
  return b;
}

const idle = (b: Backlog) => b.unpaid + b.unreminded + b.waitingParcels + b.unsettledNotifications + b.jobsDue + b.jobsInFlight + b.parcelGroups === 0;

/** Polls until the backlog is empty twice in a row, or the time is up. */
export async function waitUntilSettled(db: Db, redis: Redis, prefix: string, timeoutMs: number): Promise<{ settled: boolean; ms: number; backlog: Backlog }> {
  const t0 = Date.now();
  let quietPolls = 0;
  for (;;) {
    const b = await backlog(db, redis, prefix);
    quietPolls = idle(b) ? quietPolls + 1 : 0;
    if (quietPolls >= 2 || Date.now() - t0 > timeoutMs) return { settled: quietPolls >= 2, ms: Date.now() - t0, backlog: b };
    await sleep(500);
  }
}
