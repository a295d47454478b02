// The parcels model suite's end of a run: waits for the run's parcels and
// notices to settle, reads them once and holds them to the checks.
import { type Real, problems, settled } from '../runner.js';
import type { FaultSpan } from '../world.js';
import { type Counts, type Db, type Sent, checkBatch, checkDelivery, checkParcels, checkStrays } from './checks.js';
import { type Model, SETTLE_MS } from './model.js';

// Carried from one run to the next of this file's suite: a fault late in the
// last run can still hold this one up (checkBatch's `prompt`, checkStrays' spans).
let lastRunFaulted = false;
let lastRunSpans: FaultSpan[] = [];

/** Every accepted parcel BATCHED and every notice of the run's batches SENT, for a while (a late commit or send would show). */
function settle(m: Model, db: Db): Promise<boolean> {
  const codes = m.areas.map((a) => a.code);
  const trackingNos = m.parcels.map((x) => x.trackingNo);
  return settled(async () => {
    if (await db.parcel.count({ where: { trackingNo: { in: trackingNos }, status: { not: 'BATCHED' } } })) return false;
    const ids = (await db.batch.findMany({ where: { areaCode: { in: codes } }, select: { id: true } })).map((b) => b.id);
    return (await db.notification.count({ where: { batchId: { in: ids }, status: { not: 'SENT' } } })) === 0;
  }, SETTLE_MS);
}

export async function settleAndCheck(m: Model, r: Real): Promise<Record<string, number>> {
  const db = r.world.db;
  const calm = await settle(m, db);
  const codes = m.areas.map((a) => a.code);
  const batches = await db.batch.findMany({ where: { areaCode: { in: codes } } });
  const ids = batches.map((b) => b.id);
  const rows = await db.parcel.findMany({
    where: { OR: [{ trackingNo: { in: [...m.parcels.map((x) => x.trackingNo), ...m.refused] } }, { areaCode: { in: codes } }, { batchId: { in: ids } }] },
  });
  const contacts = m.areas.flatMap((a) => a.versions.map((v) => v.contact));
  const notes = await db.notification.findMany({ where: { OR: [{ batchId: { in: ids } }, { recipient: { in: contacts } }] } });
  const sent = r.world.webhook.delivered.map((c) => c.body as Sent);
  const p = problems();
  if (!calm) p.add(`not settled within ${SETTLE_MS} ms`);
  for (const n of notes)
    if (!n.batchId || !ids.includes(n.batchId)) p.add(`notice ${n.id} (${n.kind}) to ${n.recipient} for batch ${n.batchId}: no batch of this run`);
  const counts: Counts = {
    parcels: m.parcels.length,
    batches: batches.length,
    full: 0,
    timeout: 0,
    delivered: 0,
    deliveredTwice: 0,
    strays: m.strays,
    straysAimed: m.aimed.length,
    straysChecked: 0,
  };
  const faultless = Object.keys(r.run.faults).length === 0;
  const prompt = faultless && !lastRunFaulted;
  lastRunFaulted = !faultless;
  const byId = new Map(batches.map((b) => [b.id, b]));
  checkParcels(m, rows, byId, p, faultless);
  checkStrays(m, rows, byId, [...lastRunSpans, ...r.run.faultSpans], p, counts);
  lastRunSpans = r.run.faultSpans;
  for (const b of batches) {
    counts[b.reason === 'FULL' ? 'full' : 'timeout']++;
    const mine = notes.filter((n) => n.batchId === b.id);
    checkBatch(
      m,
      b,
      rows.filter((x) => x.batchId === b.id),
      mine,
      p,
      prompt,
    );
    checkDelivery(mine.length === 1 ? mine[0] : undefined, sent, r, p, counts);
  }
  for (const id of m.batchIds) if (!ids.includes(id)) p.add(`batch ${id} was answered, and is no batch of this run's areas`);
  p.throwIfAny(() => `run ${r.tag} (logs: ${r.world.saveLogs(r.tag)})`);
  return counts;
}
