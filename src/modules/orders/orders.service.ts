// The orders domain: create (idempotent), pay, cancel, and the expiry and
// reconciliation work behind them. PostgreSQL decides; the queue is told after
// the commit, best effort, and the reconciliation pass repairs what it missed.
import { randomUUID } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import { isDatabaseUnavailable, isUniqueViolation } from '../../core/db-errors.js';
import { type Gatherer, createGatherer, settleEach } from '../../core/gather.js';
import { requestHash } from '../../core/http/idempotency-key.js';
import type { Logger } from '../../core/logger.js';
import { withTimeout } from '../../core/timeout.js';
import type { NotificationDispatch } from '../../core/outbox.js';
import type { Queue, ScheduleInput } from '../../queue/queue.js';
import type { CreateOrderInput } from './orders.schemas.js';
import type { NewOrder, OrderRow, OrdersRepository } from './orders.repository.js';

export const EXPIRE_JOB = 'order.expire';
export const expireJobId = (orderId: string) => `order:${orderId}:expire`;

const QUEUE_CALL_TIMEOUT_MS = 2_000;
const RECONCILE_BATCH = 500;
const RECONCILE_MAX_BATCHES = 40;
// Creates arriving in one event-loop turn share one INSERT and one schedule call.
const GATHER_MAX = 100;

export type OrdersServiceDeps = {
  readonly repo: OrdersRepository;
  readonly queue: Queue;
  readonly dispatch: NotificationDispatch;
  readonly log: Logger;
  readonly defaultTimeoutSeconds: number;
  readonly reconcileGraceSeconds: number;
};

/**
 * Concurrent creates share one INSERT statement. A row that fails it (an
 * Idempotency-Key race) must not fail the others, so a failed batch is retried
 * row by row, unless the database is not there at all. Rows sharing a key are
 * retried one after another in arrival order, so the first one wins, as it
 * would have without the batch; the rest run side by side.
 */
export function gatherInserts(repo: Pick<OrdersRepository, 'insertMany'>): Gatherer<NewOrder, OrderRow> {
  return createGatherer<NewOrder, OrderRow>(async (orders) => {
    try {
      return (await repo.insertMany(orders)).map((value) => ({ ok: true, value }));
    } catch (err) {
      if (orders.length === 1 || isDatabaseUnavailable(err)) throw err;
      const sameKeyBefore = new Map<string, Promise<unknown>>();
      return settleEach(orders, (o) => {
        const insertOne = async () => (await repo.insertMany([o]))[0] as OrderRow;
        if (o.idempotencyKey === null) return insertOne();
        const turn = (sameKeyBefore.get(o.idempotencyKey) ?? Promise.resolve()).then(insertOne, insertOne);
        sameKeyBefore.set(o.idempotencyKey, turn);
        return turn;
      });
    }
  }, GATHER_MAX);
}

export type ExpireResult = { kind: 'cancelled' } | { kind: 'settled' } | { kind: 'not_due'; expiresAt: Date };

export function createOrdersService(d: OrdersServiceDeps) {
  const { repo, queue, log } = d;

  const inserts = gatherInserts(repo);
  const expirySchedules = createGatherer<ScheduleInput, unknown>(
    async (jobs) => (await queue.scheduleMany(jobs)).map((value) => ({ ok: true, value })),
    GATHER_MAX,
  );

  async function scheduleExpiry(order: Pick<OrderRow, 'id' | 'expiresAt'>): Promise<void> {
    try {
      await withTimeout(
        expirySchedules.submit({ id: expireJobId(order.id), type: EXPIRE_JOB, at: order.expiresAt, payload: { orderId: order.id }, mode: 'nx' }),
        QUEUE_CALL_TIMEOUT_MS,
        'schedule expiry',
      );
    } catch (err) {
      log.warn({ err, orderId: order.id }, 'expiry job not scheduled; the reconciliation pass will create it');
    }
  }

  async function dropExpiry(orderId: string): Promise<void> {
    try {
      await withTimeout(queue.cancel(expireJobId(orderId)), QUEUE_CALL_TIMEOUT_MS, 'cancel expiry');
    } catch (err) {
      // Harmless: the handler finds the order settled and acks.
      log.warn({ err, orderId }, 'expiry job not removed');
    }
  }

  async function mustFind(id: string): Promise<OrderRow> {
    const order = await repo.find(id);
    if (!order) throw new AppError('ORDER_NOT_FOUND', 404, `order ${id} does not exist`);
    return order;
  }

  async function replay(key: string, hash: string): Promise<{ order: OrderRow; replayed: true } | null> {
    const existing = await repo.findByIdempotencyKey(key);
    if (!existing) return null;
    if (existing.requestHash !== hash) {
      throw new AppError('IDEMPOTENCY_KEY_REUSED', 422, 'this Idempotency-Key was used with a different request body');
    }
    if (existing.order.status === 'UNPAID') await scheduleExpiry(existing.order);
    return { order: existing.order, replayed: true };
  }

  return {
    async create(input: CreateOrderInput, idempotencyKey: string | null): Promise<{ order: OrderRow; replayed: boolean }> {
      // The body's hash is only needed to compare retries under one Idempotency-Key.
      const hash = idempotencyKey ? requestHash(input) : '';
      if (idempotencyKey) {
        const r = await replay(idempotencyKey, hash);
        if (r) return r;
      }
      let order: OrderRow;
      try {
        order = await inserts.submit({
          id: randomUUID(),
          customerId: input.customerId,
          currency: input.currency,
          totalCents: input.items.reduce((sum, i) => sum + i.quantity * i.unitPriceCents, 0),
          timeoutSeconds: input.paymentTimeoutSeconds ?? d.defaultTimeoutSeconds,
          idempotencyKey,
          requestHash: idempotencyKey ? hash : null,
          items: input.items,
        });
      } catch (err) {
        // Two requests with one key raced; the loser answers with the winner's order.
        if (idempotencyKey && isUniqueViolation(err)) {
          const r = await replay(idempotencyKey, hash);
          if (r) return r;
        }
        throw err;
      }
      await scheduleExpiry(order);
      return { order, replayed: false };
    },

    get: mustFind,

    async pay(id: string, paymentRef: string | null): Promise<OrderRow> {
      const paid = await repo.pay(id, paymentRef);
      if (paid) {
        await dropExpiry(id);
        return paid;
      }
      const st = await repo.state(id);
      if (!st) throw new AppError('ORDER_NOT_FOUND', 404, `order ${id} does not exist`);
      if (st.status === 'PAID') return mustFind(id); // paying twice is answered like the first time
      if (st.status === 'CANCELLED') throw new AppError('ORDER_NOT_PAYABLE', 409, 'the order was cancelled');
      throw new AppError('ORDER_EXPIRED', 409, 'the payment window of the order has closed');
    },

    async cancel(id: string): Promise<OrderRow> {
      const done = await repo.cancel(id, 'CUSTOMER');
      if (done) {
        await Promise.all([dropExpiry(id), d.dispatch(done.notificationId ? [done.notificationId] : [])]);
        return mustFind(id);
      }
      const order = await mustFind(id);
      if (order.status === 'PAID') throw new AppError('ORDER_NOT_CANCELLABLE', 409, 'a paid order cannot be cancelled');
      return order; // already cancelled
    },

    /** The expiry job: cancel if still unpaid and past its deadline by the database clock. */
    async expire(orderId: string): Promise<ExpireResult> {
      const done = await repo.cancel(orderId, 'PAYMENT_TIMEOUT');
      if (done) {
        await d.dispatch(done.notificationId ? [done.notificationId] : []);
        return { kind: 'cancelled' };
      }
      const st = await repo.state(orderId);
      if (st?.status === 'UNPAID') return { kind: 'not_due', expiresAt: st.expiresAt };
      return { kind: 'settled' };
    },

    /**
     * Safety net: cancel long-overdue orders, and re-create missing expiry jobs
     * of orders expiring within `horizonMs` (later ones are checked once they
     * enter that window, which keeps each pass small).
     */
    async reconcile(horizonMs: number): Promise<{ cancelled: number; jobsCreated: number }> {
      let cancelled = 0;
      for (let i = 0; i < RECONCILE_MAX_BATCHES; i++) {
        const r = await repo.cancelOverdue(d.reconcileGraceSeconds, RECONCILE_BATCH);
        cancelled += r.cancelled;
        await d.dispatch(r.notificationIds);
        if (r.cancelled < RECONCILE_BATCH) break;
      }
      let jobsCreated = 0;
      let cursor: { id: string; expiresAt: Date } | null = null;
      for (;;) {
        const page: { id: string; expiresAt: Date }[] = await repo.listUnpaid(new Date(Date.now() + horizonMs), cursor, 1_000);
        if (page.length === 0) break;
        const results = await queue.scheduleMany(
          page.map((o) => ({ id: expireJobId(o.id), type: EXPIRE_JOB, at: o.expiresAt, payload: { orderId: o.id }, mode: 'nx' as const })),
        );
        jobsCreated += results.filter((r) => r.status === 'created').length;
        cursor = page[page.length - 1] ?? null;
      }
      if (cancelled || jobsCreated) log.warn({ cancelled, jobsCreated }, 'orders reconciliation repaired state');
      return { cancelled, jobsCreated };
    },
  };
}

export type OrdersService = ReturnType<typeof createOrdersService>;
