// The orders domain: create (idempotent), pay, cancel, and the expiry and
// reconciliation work behind them. PostgreSQL decides; the queue is told after
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
import { rowJobId } from '../../core/row-job-id.js';

export const EXPIRE_JOB = 'order.expire';
const EXPIRE_JOB_ID = rowJobId('order', 'expire', { anyCase: true });
export const expireJobId = EXPIRE_JOB_ID.of;
/** The order an expiry job's id names; null for any other id. */
export const orderIdOfExpireJob = EXPIRE_JOB_ID.rowOf;
/**
 * An expiry job's payload: empty, as the handler reads the order from the job
 * id. A short record fits a record group (BENCHMARKS.md, "Engine at size").
 */
export const expirePayload = () => ({});

// Creates arriving in one event-loop turn share one INSERT and one schedule call.
const GATHER_MAX = 100;

export type OrdersServiceDeps = {
  readonly repo: OrdersRepository;
  readonly queue: Queue;
  readonly dispatch: NotificationDispatch;
  readonly log: Logger;
  readonly defaultTimeoutSeconds: number;
};

/** Concurrent creates share one INSERT statement (gatherCreates). */
export const gatherInserts = (repo: Pick<OrdersRepository, 'insertMany'>): Gatherer<NewOrder, OrderRow> =>
  gatherCreates((rows) => repo.insertMany(rows), GATHER_MAX);

export function createOrdersService(d: OrdersServiceDeps) {
  const { repo, queue, log } = d;

  const inserts = gatherInserts(repo);
  const expirySchedules = gatherSchedules(queue, GATHER_MAX);

  async function scheduleExpiry(order: Pick<OrderRow, 'id' | 'expiresAt'>): Promise<void> {
    await afterCommit(
      () =>
        expirySchedules.submit({
          id: expireJobId(order.id),
          type: EXPIRE_JOB,
          at: order.expiresAt,
          payload: expirePayload(),
          mode: 'nx',
        }),
      'schedule expiry',
      log,
      { orderId: order.id },
      'the reconciliation pass will create the job',
    );
  }

  async function dropExpiry(orderId: string): Promise<void> {
    // Harmless if it fails: the handler finds the order settled and acks.
    await afterCommit(() => queue.cancel(expireJobId(orderId)), 'cancel expiry', log, { orderId }, 'its handler will find the order settled');
  }

  /** The client's order; another client's is as absent as an unknown one. */
  async function mustFind(client: string, id: string): Promise<OrderRow> {
    const order = await repo.find(client, id);
    if (!order) throw new AppError('ORDER_NOT_FOUND', 404, `order ${id} does not exist`);
    return order;
  }

  return {
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
        await Promise.all([dropExpiry(id), d.dispatch(done.notificationId ? [done.notificationId] : [])]);
        return mustFind(client, id);
      }
      const order = await mustFind(client, id);
      if (order.status === 'PAID') throw new AppError('ORDER_NOT_CANCELLABLE', 409, 'a paid order cannot be cancelled');
      return order; // already cancelled
    },

    /**
     * The expiry jobs of many orders in one statement: each cancelled if still
     * unpaid and past its deadline by the database clock; the cancellations'
     * notifications handed to delivery together. An outcome per order id.
     */
    async expireMany(orderIds: readonly string[]): Promise<Map<string, ExpiryOutcome>> {
      const outcomes = await repo.expireMany(orderIds);
      const notices = [...outcomes.values()].flatMap((r) => (r.kind === 'cancelled' && r.notificationId ? [r.notificationId] : []));
      if (notices.length > 0) await d.dispatch(notices);
      return outcomes;
    },
  };
}

export type OrdersService = ReturnType<typeof createOrdersService>;
