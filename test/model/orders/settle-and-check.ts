// The orders model suite's end of a run: waits for the run's orders and
// notices to settle, reads them once and holds them to the rules, the rule
// that no effect crosses clients first (the payment reminders' rules in
// reminder-checks.ts).
import { type Real, problems, repeatExplained, settled } from '../runner.js';
import { MODEL_CLIENTS } from '../world.js';
import { rightClocks } from './clock.step.js';
import { type Model, ON_TIME_MS, type Order, SETTLE_MS, type Seen, faultNear } from './model.js';
import { REMINDER_KIND, reminderProblems } from './reminder-checks.js';

/**
 * Whether order `o`, cancelled by its timeout at `cancelledAt`, was
 * cancelled in time: null when not judged (its expiry job cancelled, or a
 * fault from its creation, or its expiry's early run, to the bound), else how
 * late and whether within the bound.
 */
function onTime(o: Order, cancelledAt: number, r: Real): { lateMs: number; ok: boolean } | null {
  if (o.expiry?.jobCancelled) return null;
  const from = o.expiry?.ranEarlyAt ?? o.createdAt;
  const until = o.expiresAt + ON_TIME_MS;
  if (faultNear(r, from, until)) return null;
  const lateMs = cancelledAt - o.expiresAt;
  return { lateMs, ok: lateMs <= ON_TIME_MS };
}

/**
 * What of order `o` (its row and notices) shows another client's effect: a
 * row or a notice of another client than the one that created it, a
 * customer's cancel when only the other client sent one, a PAID order only
 * the other client paid.
 */
function crossed(o: Order, row: Seen['row'], notes: Seen['notes']): string[] {
  const found: string[] = [];
  const of = `order ${o.id} (of ${o.client})`;
  if (row.client !== o.client) found.push(`${of}: its row is ${row.client}'s`);
  for (const n of notes) if (n.client !== o.client) found.push(`${of}: notice ${n.id} is ${n.client}'s`);
  if (o.foreign.cancel > 0 && !o.tried.cancel && row.cancelReason === 'CUSTOMER') {
    found.push(`${of}: cancelled for the customer, yet only the other client sent a cancel (${o.foreign.cancel})`);
  }
  if (o.foreign.pay > 0 && !o.tried.pay && row.status === 'PAID') found.push(`${of}: PAID, yet only the other client sent a pay (${o.foreign.pay})`);
  return found;
}

export async function settleAndCheck(m: Model, r: Real): Promise<Record<string, number>> {
  rightClocks(r.world);
  const ids = m.orders.map((o) => o.id);
  const db = r.world.db;
  const calm = await settled(async () => {
    const open = await db.order.count({ where: { id: { in: ids }, status: 'UNPAID' } });
    // A withdrawn reminder ends CANCELLED; a cancellation notice only SENT (checked below).
    const unsent = await db.notification.count({ where: { orderId: { in: ids }, status: { notIn: ['SENT', 'CANCELLED'] } } });
    return open + unsent === 0;
  }, SETTLE_MS);
  const rows = await db.order.findMany({ where: { id: { in: ids } } });
  const notes = await db.notification.findMany({ where: { orderId: { in: ids } } });
  const p = problems();
  if (!calm) p.add(`not settled within ${SETTLE_MS} ms`);
  const delivered = new Map<string, number>();
  for (const c of r.world.webhook.delivered) delivered.set(c.body.id, (delivered.get(c.body.id) ?? 0) + 1);
  const counts = {
    orders: ids.length,
    ofOtherClients: m.orders.filter((o) => o.client !== MODEL_CLIENTS[0]).length,
    foreignPaysOrCancels: m.orders.filter((o) => o.foreign.pay + o.foreign.cancel > 0).length,
    paid: 0,
    cancelledByTimeout: 0,
    cancelledByCustomer: 0,
    delivered: 0,
    deliveredTwice: 0,
    purged: 0,
    clockSteps: m.clockSteps,
    onTimeJudged: 0,
    onTimeJudgedAfterEarlyRun: 0,
    moved: m.orders.filter((o) => o.deadlines.length > 1).length,
    reminded: 0,
    remindersJudged: 0,
  };
  for (const o of m.orders) {
    if (o.purged) {
      counts.purged++;
      // Whatever was seen of it: the receiver took its one notice, or none for a paid order.
      const taken = r.world.webhook.delivered.filter(
        (c) => c.body.kind === 'ORDER_CANCELLED' && (c.body as { payload?: { orderId?: string } }).payload?.orderId === o.id,
      );
      const notices = new Set(taken.map((c) => c.body.id));
      if (o.paid ? notices.size !== 0 : notices.size !== 1) p.add(`order ${o.id}: deleted by retention, ${notices.size} notices taken by the receiver`);
      if (o.purged === 'unknown') continue;
    }
    const seen = o.purged as Seen | undefined; // not 'unknown': that went on above
    const row = seen ? seen.row : rows.find((x) => x.id === o.id);
    const all = seen ? seen.notes : notes.filter((n) => n.orderId === o.id);
    const mine = all.filter((n) => n.kind !== REMINDER_KIND);
    if (!row) {
      p.add(`order ${o.id} is gone`);
      continue;
    }
    const crossing = crossed(o, row, all);
    if (crossing.length) {
      crossing.forEach(p.add);
      continue;
    }
    reminderProblems(
      o,
      row,
      all.filter((n) => n.kind === REMINDER_KIND),
      r,
      counts,
    ).forEach(p.add);
    if (o.paid) {
      counts.paid++;
      if (row.status !== 'PAID') p.add(`order ${o.id}: pay answered 200, now ${row.status}`);
      if (row.paidAt && row.paidAt.getTime() >= o.expiresAt) p.add(`order ${o.id}: paid ${row.paidAt.getTime() - o.expiresAt} ms after its deadline`);
      if (mine.length) p.add(`order ${o.id}: paid, yet ${mine.length} cancellation notice(s)`);
      continue;
    }
    if (row.status !== 'CANCELLED') {
      p.add(`order ${o.id}: never paid, now ${row.status}`);
      continue;
    }
    if (row.cancelReason === 'CUSTOMER') {
      counts.cancelledByCustomer++;
      if (!o.cancelled) p.add(`order ${o.id}: cancelled for the customer, but no cancel was answered 200`);
    } else {
      counts.cancelledByTimeout++;
      const early = o.expiresAt - (row.cancelledAt?.getTime() ?? 0);
      if (early > 0) p.add(`order ${o.id}: cancelled for timeout ${early} ms before its deadline`);
      const judged = onTime(o, row.cancelledAt?.getTime() ?? 0, r);
      if (judged) {
        counts.onTimeJudged++;
        if (o.expiry?.ranEarlyAt !== undefined) counts.onTimeJudgedAfterEarlyRun++;
        if (!judged.ok) {
          const how = o.expiry?.ranEarlyAt === undefined ? '' : `, its expiry run ${o.expiresAt - o.expiry.ranEarlyAt} ms early`;
          p.add(`order ${o.id}: cancelled for timeout ${judged.lateMs} ms after its deadline${how}, without a fault`);
        }
      }
    }
    if (mine.length !== 1) {
      p.add(`order ${o.id}: ${mine.length} cancellation notices`);
      continue;
    }
    const n = mine[0]!;
    const got = delivered.get(n.id) ?? 0;
    if (n.status !== 'SENT' || got === 0) p.add(`order ${o.id}: notice ${n.id} is ${n.status}, the receiver took it ${got} times`);
    if (got > 0) counts.delivered++;
    if (got > 1) {
      counts.deliveredTwice++;
      if (!repeatExplained(r, n)) p.add(`order ${o.id}: notice ${n.id} taken ${got} times without a fault that could cut a send off`);
    }
  }
  p.throwIfAny(() => `run ${r.tag} (logs: ${r.world.saveLogs(r.tag)})`);
  return counts;
}
