// Every queue of the service, for the operators' commands (stats, ungroup):
// only the composition knows which modules there are.
import type { Config } from '../config.js';
import type { RedisClient } from '../core/redis.js';
import { APPOINTMENTS_QUEUE } from '../modules/appointments/appointments.module.js';
import { NOTIFICATIONS_QUEUE } from '../modules/notifications/notifications.module.js';
import { ORDERS_QUEUE } from '../modules/orders/orders.module.js';
import { PARCELS_QUEUE } from '../modules/parcels/parcels.module.js';
import { REPORTS_QUEUE } from '../modules/reports/reports.module.js';
import { TIMERS_QUEUE } from '../modules/timers/timers.module.js';
import { createQueue, type Queue } from '../queue/index.js';

const QUEUES = [ORDERS_QUEUE, APPOINTMENTS_QUEUE, NOTIFICATIONS_QUEUE, PARCELS_QUEUE, REPORTS_QUEUE, TIMERS_QUEUE];

/** Every queue of the service, opened for an operator's command (no job types: nothing is handled). */
export function serviceQueues(redis: RedisClient, config: Config): Queue[] {
  return QUEUES.map((name) => createQueue(redis, { name, types: {}, prefix: config.QUEUE_PREFIX, shards: config.QUEUE_SHARDS }));
}
