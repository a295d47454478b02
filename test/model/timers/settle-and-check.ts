// The timers model suite's check once a run has settled: the record (every
// firing's delivery row), what the receiver got (each call's webhook-id, the
// row's id, and its body) and the model (what each answer said) agree.
import type { Received } from '../../helpers/webhook.js';
import { type Real, SETTLE_MS, problems, settled } from '../runner.js';
import { type Firing, type Model, type Timer, current, runPrefix, same, version } from './model.js';
import { type Row, checkFiring } from './firing-checks.js';
import { clearRateLimits } from './rate-limit.step.js';

/** What a timer's call carries. */
export type CallBody = { key: string; payload: unknown; fireAt: string; firedAt: string; attempt: number };
export type Call = Received & { body: CallBody };

const DONE = new Set(['SENT', 'FAILED', 'CANCELLED']);

export async function settleAndCheck(m: Model, r: Real): Promise<Record<string, number>> {
  const db = r.world.db;
  const ofRun = { key: { startsWith: runPrefix(r) } };
  const calm = await settled(async () => {
    const rows = await db.notification.findMany({ where: { timer: ofRun }, select: { status: true } });
    return rows.every((n) => DONE.has(n.status));
  }, SETTLE_MS);
  const timers = await db.timer.findMany({ where: ofRun });
  const rows = (await db.notification.findMany({ where: { timer: ofRun } })) as Row[];
  const p = problems();
  if (!calm) p.add(`not settled within ${SETTLE_MS} ms: ${JSON.stringify(rows.map((n) => n.status))}`);
  const calls = (r.world.webhook.calls as Call[]).filter((c) => typeof c.body.key === 'string' && c.body.key.startsWith(runPrefix(r)));
  const taken = new Set(r.world.webhook.delivered);
  const counts = { timers: timers.length, firings: rows.length, calls: calls.length, delivered: 0, failed: 0, refused: 0, cancelled: 0, calledAgain: 0 };

  // The timers: those the answers made, each pointing at the firing the last answer left current.
  const modelKeys = m.timers.map((t) => `${t.client}/${t.key}`).sort();
  const dbKeys = timers.map((t) => `${t.client}/${t.key}`).sort();
  if (!same(modelKeys, dbKeys)) p.add(`timers ${dbKeys.join(' ')}; the answers made ${modelKeys.join(' ')}`);
  const firings = new Map<string, { t: Timer; f: Firing }>();
  for (const t of m.timers) for (const f of t.firings) firings.set(f.id, { t, f });
  for (const t of m.timers) {
    const row = timers.find((x) => x.client === t.client && x.key === t.key);
    if (row && row.notificationId !== current(t).id) p.add(`timer ${t.client}/${t.key}: current firing ${row.notificationId}, the model's ${current(t).id}`);
  }

  // Every call of the run is one of its firings', under its key.
  for (const c of calls) {
    const row = rows.find((n) => n.id === c.idempotencyKey);
    const timer = timers.find((x) => x.id === row?.timerId);
    if (!row || timer?.key !== c.body.key) p.add(`a call of ${c.body.key} with webhook-id ${c.idempotencyKey}: no firing of that timer has it`);
  }

  for (const n of rows) {
    const timer = timers.find((x) => x.id === n.timerId)!;
    const mine = calls.filter((c) => c.idempotencyKey === n.id).sort((a, b) => a.at - b.at);
    const known = firings.get(n.id);
    if (!known && !m.timers.find((t) => t.client === timer.client && t.key === timer.key)?.uncertain) {
      p.add(`firing ${n.id} of ${timer.client}/${timer.key} (${n.status}): no answer made it`);
    }
    const seen = checkFiring(r, p, { row: n, key: timer.key, calls: mine, taken, model: known?.f ?? null, uncertain: known?.t.uncertain ?? true });
    if (n.status === 'SENT') counts.delivered++;
    if (n.status === 'FAILED') counts.failed++;
    if (n.status === 'CANCELLED') counts.cancelled++;
    counts.refused += seen.refused;
    if (seen.calledAgain) counts.calledAgain++;
  }
  for (const [id, { t, f }] of firings) {
    if (!rows.some((n) => n.id === id)) p.add(`firing ${id} of ${t.client}/${t.key} (answered ${version(f).fireAt}): no row`);
  }
  // Limits set by the run held while it settled; the next run starts without.
  await clearRateLimits(m, r);
  p.throwIfAny(() => `run ${r.tag} (logs: ${r.world.saveLogs(r.tag)})`);
  // What the answers met, beside what the record holds: keeps of a timer that exists, moves, firings made again, 409s, cancels.
  return { ...counts, ...m.counts };
}
