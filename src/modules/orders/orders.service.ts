// The orders domain: create (idempotent), pay, cancel, the deadline's moves and
// reminder (orders.deadlines.ts), and the expiry and reconciliation work
// behind them. PostgreSQL decides; the queue is told after
// the commit, best effort, and the reconciliation pass repairs what it missed.
import { randomUUID } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import type { Gatherer } from '../../core/gather.js';
import { gatherSchedules } from '../../core/module-queue.js';
import { createIdempotently, gatherCreates } from '../../core/idempotent-create.js';
import type { Logger } from '../../core/logger.js';
import { afterCommit } from '../../core/redis-call.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import type { Queue } from '../../queue/index.js';
import type { CreateOrderInput } from './orders.schemas.js';
import type { ExpiryOutcome, NewOrder, OrderRow, OrdersRepository } from './orders.repository.js';
import { createOrderDeadlines, deadlineJobs } from './orders.deadlines.js';
import { expireJobId } from './orders.job-ids.js';

export { EXPIRE_JOB, REMIND_JOB, expireJobId, expirePayload, orderIdOfExpireJob, orderIdOfRemindJob, remindJobId } from './orders.job-ids.js';

// Creates arriving in one event-loop turn share one INSERT and one schedule call.
const GATHER_MAX = 100;

export type OrdersServiceDeps = {
  readonly repo: OrdersRepository;
  readonly queue: Queue;
  readonly dispatch: NotificationDispatch;
  readonly log: Logger;
  readonly defaultTimeoutSeconds: number;
  /** ORDER_MAX_WINDOW_SECONDS: the longest window a deadline move may give, from the order's creation. */
  readonly maxWindowSeconds: number;
  /** PAYMENT_REMINDER_BEFORE_SECONDS: the reminder's lead when a create gives none; none: no reminder. */
  readonly reminderBeforeSeconds: number | undefined;
};

/** A create's reminder lead: its own (0: none), else the configured one (none: no reminder). */
function reminderLead(asked: number | null | undefined, configured: number | undefined): number | null {
  if (asked === 0) return null;
  return asked ?? configured ?? null;
}

/** Concurrent creates share one INSERT statement (gatherCreates). */
export const gatherInserts = (repo: Pick<OrdersRepository, 'insertMany'>): Gatherer<NewOrder, OrderRow> =>
  gatherCreates((rows) => repo.insertMany(rows), GATHER_MAX);

export function createOrdersService(d: OrdersServiceDeps) {
  const { repo, queue, log } = d;

  const inserts = gatherInserts(repo);
  const expirySchedules = gatherSchedules(queue, GATHER_MAX);

  const deadlines = createOrderDeadlines({ repo, queue, dispatch: d.dispatch, log, maxWindowSeconds: d.maxWindowSeconds });

  /** A new order's expiry job, and its reminder's when it has one. */
  async function scheduleExpiry(order: Pick<OrderRow, 'id' | 'expiresAt' | 'paymentRemindAt'>): Promise<void> {
    await afterCommit(
      () => Promise.all(deadlineJobs(order, 'nx').map((job) => expirySchedules.submit(job))),
      'schedule expiry',
      log,
      { orderId: order.id },
      'the reconciliation pass will create the job',
    );
  }

  async function dropExpiry(orderId: string): Promise<void> {
    // Harmless if it fails: the handler finds the order settled and acks.
    await afterCommit(() => queue.cancel(expireJobId(orderId)), 'cancel expiry', log, { orderId }, 'its handler will find the order settled');
    // Its reminder job is left to run: the reminder's statement finds the order settled and writes nothing.
  }

  /** The client's order; another client's is as absent as an unknown one. */
  async function mustFind(client: string, id: string): Promise<OrderRow> {
    const order = await repo.find(client, id);
    if (!order) throw new AppError('ORDER_NOT_FOUND', 404, `order ${id} does not exist`);
    return order;
  }

  return {
    ...deadlines,

    async create(client: string, input: CreateOrderInput, idempotencyKey: string | null): Promise<{ order: OrderRow; replayed: boolean }> {
      const r = await createIdempotently<OrderRow>({
        key: idempotencyKey,
        body: input,
        find: async (key) => {
          const found = await repo.findByIdempotencyKey(client, key);
          return found && { row: found.order, requestHash: found.requestHash };
        },
        insert: (key, hash) =>
          inserts.submit({
            id: randomUUID(),
            client,
            customerId: input.customerId,
            currency: input.currency,
            totalCents: input.items.reduce((sum, i) => sum + i.quantity * i.unitPriceCents, 0),
            timeoutSeconds: input.paymentTimeoutSeconds ?? d.defaultTimeoutSeconds,
            reminderBeforeSeconds: reminderLead(input.paymentReminderBeforeSeconds, d.reminderBeforeSeconds),
            idempotencyKey: key,
            requestHash: hash,
            items: input.items,
          }),
        // A repeat may follow a first request whose schedule missed Redis: scheduling again (only if absent) is harmless.
        onReplay: async (order) => {
          if (order.status === 'UNPAID') await scheduleExpiry(order);
        },
      });
      if (!r.replayed) await scheduleExpiry(r.row);
      return { order: r.row, replayed: r.replayed };
    },

    get: mustFind,

    async pay(client: string, id: string, paymentRef: string | null): Promise<OrderRow> {
      const paid = await repo.pay(client, id, paymentRef);
      if (paid) {
        await dropExpiry(id);
        return paid;
      }
      const st = await repo.state(client, id);
      if (!st) throw new AppError('ORDER_NOT_FOUND', 404, `order ${id} does not exist`);
      if (st.status === 'PAID') return mustFind(client, id); // paying twice is answered like the first time
      if (st.status === 'CANCELLED') throw new AppError('ORDER_NOT_PAYABLE', 409, 'the order was cancelled');
      throw new AppError('ORDER_EXPIRED', 409, 'the payment window of the order has closed');
    },

    async cancel(client: string, id: string): Promise<OrderRow> {
      const done = await repo.cancel(client, id);
      if (done) {
        await Promise.all([dropExpiry(id), d.dispatch(done.notificationId ? [done.notificationId] : [], { kind: 'ORDER_CANCELLED' })]);
        return mustFind(client, id);
      }
      const order = await mustFind(client, id);
      if (order.status === 'PAID') throw new AppError('ORDER_NOT_CANCELLABLE', 409, 'a paid order cannot be cancelled');
      return order; // already cancelled
    },

    /**
     * The expiry jobs of many orders in one statement (expireOrders): each cancelled if still
     * unpaid and past its deadline by the database clock; the cancellations'
     * notifications handed to delivery together. An outcome per order id.
     */
    async expireMany(orderIds: readonly string[]): Promise<Map<string, ExpiryOutcome>> {
      const outcomes = await repo.expireMany(orderIds);
      const notices = [...outcomes.values()].flatMap((r) => (r.kind === 'cancelled' && r.notificationId ? [r.notificationId] : []));
      if (notices.length > 0) await d.dispatch(notices, { kind: 'ORDER_CANCELLED' });
      return outcomes;
    },
  };
}

export type OrdersService = ReturnType<typeof createOrdersService>;
