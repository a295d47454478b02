// The orders' moving deadline: a client's move of one order's payment deadline,
// an operator's extension of every unpaid order of a time range, and the
// payment reminder written before the deadline. PostgreSQL decides (one
// conditional statement each, sql/); the jobs are told after the commit, best
// effort: a job left at an older, earlier time finds its order not yet due and
// comes back when the database says (orders.jobs.ts), and the reconciliation
// pass repairs one left later than the deadline or lost.
import { isSerializationFailure } from '../../core/db-errors.js';
import { AppError } from '../../core/errors.js';
import { requestHash } from '../../core/http/idempotency-key.js';
import type { Logger } from '../../core/logger.js';
import { afterCommit } from '../../core/redis-call.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import type { Queue, ScheduleInput } from '../../queue/index.js';
import type { DeadlineMove, ExtendCursor, ExtendRange, OrderRow, OrdersRepository, ReminderOutcome } from './orders.repository.js';
import { EXPIRE_JOB, REMIND_JOB, expireJobId, expirePayload, remindJobId } from './orders.job-ids.js';

/** Orders extended by one statement (and transaction) of an operator's extension; their jobs rescheduled by one Redis call. */
export const EXTEND_PAGE = 1_000;
/** A page of an extension PostgreSQL aborted in a deadlock (it changed nothing) is made again this many times at most. */
const EXTEND_TRIES = 3;
/** A move that found nothing stopping it after it changed nothing (the order changed in between) is made again this many times at most. */
const MOVE_TRIES = 3;

/** The jobs of an order's deadline: its expiry, and its reminder when it has one. */
export function deadlineJobs(o: Pick<OrderRow, 'id' | 'expiresAt' | 'paymentRemindAt'>, mode: 'upsert' | 'nx'): ScheduleInput[] {
  const expiry: ScheduleInput = { id: expireJobId(o.id), type: EXPIRE_JOB, at: o.expiresAt, payload: expirePayload(), mode };
  if (!o.paymentRemindAt) return [expiry];
  return [expiry, { id: remindJobId(o.id), type: REMIND_JOB, at: o.paymentRemindAt, payload: {}, mode }];
}

export type DeadlinesDeps = {
  readonly repo: OrdersRepository;
  readonly queue: Queue;
  readonly dispatch: NotificationDispatch;
  readonly log: Logger;
  readonly maxWindowSeconds: number;
};

export function createOrderDeadlines(d: DeadlinesDeps) {
  const { repo, queue, log } = d;

  /** After a move: both jobs at the new times (a reminder no longer due before the deadline is dropped). */
  async function reschedule(o: OrderRow): Promise<void> {
    const ctx = { orderId: o.id };
    await afterCommit(() => queue.scheduleMany(deadlineJobs(o, 'upsert')), 'reschedule deadline', log, ctx, 'the old jobs come back at the new times');
    if (!o.paymentRemindAt) await afterCommit(() => queue.cancel(remindJobId(o.id)), 'cancel reminder', log, ctx, 'its handler finds no reminder due');
  }

  /** One page of an extension, made again if PostgreSQL aborted it in a deadlock (it changed nothing then). */
  async function extendPage(range: ExtendRange, after: ExtendCursor | null) {
    for (let tries = 1; ; tries++) {
      try {
        return await repo.extendDeadlinesPage(range, after, EXTEND_PAGE);
      } catch (err) {
        if (tries >= EXTEND_TRIES || !isSerializationFailure(err)) throw err;
      }
    }
  }

  /** Why a move changed nothing, as the API answers it; null: nothing stops it now (it raced a change). */
  function refuse(client: string, id: string, why: Awaited<ReturnType<OrdersRepository['moveRefusal']>>): Promise<OrderRow> | null {
    switch (why) {
      case null:
        return null;
      case 'not_found':
        throw new AppError('ORDER_NOT_FOUND', 404, `order ${id} does not exist`);
      case 'replay':
        return repo.find(client, id).then((o) => o ?? Promise.reject(new AppError('ORDER_NOT_FOUND', 404, `order ${id} does not exist`)));
      case 'key_reused':
        throw new AppError('IDEMPOTENCY_KEY_REUSED', 422, 'this Idempotency-Key was used with a different request body');
      case 'PAID':
      case 'CANCELLED':
        throw new AppError('ORDER_NOT_MOVABLE', 409, `the order is ${why.toLowerCase()}: its deadline no longer moves`);
      case 'UNPAID':
      case 'expired':
        throw new AppError('ORDER_EXPIRED', 409, 'the payment window of the order has closed');
      case 'in_past':
        throw new AppError('EXPIRES_AT_IN_PAST', 422, 'the new deadline must be after now');
      case 'too_long':
        throw new AppError('PAYMENT_WINDOW_TOO_LONG', 422, `the payment window may last ${d.maxWindowSeconds} s from the order's creation at most`);
    }
  }

  return {
    /**
     * Moves client `client`'s order `id` to a new deadline (a time, or its
     * deadline plus seconds) while it is UNPAID and inside its window; a move
     * repeated under its Idempotency-Key answers the order as it is.
     */
    async move(client: string, id: string, move: DeadlineMove, idempotencyKey: string | null, body: unknown): Promise<OrderRow> {
      // A time no window can reach is refused before it reaches the database (which judges the rest by its clock).
      if ('expiresAt' in move && move.expiresAt.getTime() > Date.now() + d.maxWindowSeconds * 1_000 + 86_400_000)
        throw new AppError('PAYMENT_WINDOW_TOO_LONG', 422, `the payment window may last ${d.maxWindowSeconds} s from the order's creation at most`);
      const key = idempotencyKey ? { key: idempotencyKey, hash: requestHash(body) } : null;
      for (let tries = 1; ; tries++) {
        const moved = await repo.moveDeadline(client, id, move, d.maxWindowSeconds, key);
        if (moved) {
          await reschedule(moved);
          return moved;
        }
        const answer = refuse(client, id, await repo.moveRefusal(client, id, move, d.maxWindowSeconds, key));
        if (answer) {
          const o = await answer;
          if (o.status === 'UNPAID') await reschedule(o); // a replay: the first move's schedule may have missed Redis
          return o;
        }
        // The order changed between the two statements: judge it again, a few times.
        if (tries >= MOVE_TRIES) throw new Error(`order ${id}: the deadline move neither took nor found a reason not to`);
      }
    },

    /**
     * An operator gives `bySeconds` back to every UNPAID order whose deadline
     * is in [from, to), of `client` or of all, a page of EXTEND_PAGE orders a
     * transaction, each page's jobs moved after its commit; the count extended.
     */
    async extend(from: Date, to: Date, bySeconds: number, client: string | null): Promise<number> {
      const range = { from, to, bySeconds, client };
      let total = 0;
      let after: ExtendCursor | null = null;
      try {
        do {
          const page = await extendPage(range, after);
          total += page.extended.length;
          after = page.next;
          const jobs = page.extended.flatMap((o) => deadlineJobs(o, 'upsert'));
          if (jobs.length > 0)
            await afterCommit(
              () => queue.scheduleMany(jobs),
              'reschedule extended deadlines',
              log,
              { orders: page.extended.length },
              'the old jobs come back at the new times',
            );
        } while (after);
      } catch (err) {
        // The pages before it committed: a repeat would extend those again.
        if (total > 0) log.error({ from, to, bySeconds, client, extended: total, err }, 'order deadline extension stopped part way');
        throw err;
      }
      log.info({ from, to, bySeconds, client, extended: total }, 'order deadlines extended');
      return total;
    },

    /** The reminder jobs of many orders in one statement; the new reminders handed to delivery together. An outcome per order id. */
    async remindMany(orderIds: readonly string[]): Promise<Map<string, ReminderOutcome>> {
      const outcomes = await repo.remindMany(orderIds);
      const of = (kind: ReminderOutcome['kind']) => [...outcomes.values()].flatMap((r) => (r.kind === kind && 'notificationId' in r ? [r.notificationId] : []));
      // Fresh: a reminder taken back may still have its earlier delivery's dead
      // job (or one waiting out a backoff), which a schedule only if absent keeps.
      const written = of('written');
      if (written.length > 0) await d.dispatch(written, { fresh: true, kind: 'ORDER_PAYMENT_REMINDER' });
      // Found PENDING by a rerun: its dispatch may have been lost (its take-back's
      // delivery job dead), or its delivery waits out a backoff (its attempts go on).
      const pending = of('pending');
      if (pending.length > 0) await d.dispatch(pending, { revive: true, kind: 'ORDER_PAYMENT_REMINDER' });
      return outcomes;
    },
  };
}

export type OrderDeadlines = ReturnType<typeof createOrderDeadlines>;
