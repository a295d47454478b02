// The parcels model suite's end of a run: waits for the run's parcels and
// notices to settle, reads them once (both clients' rows: the run's area
// codes and tracking numbers are both clients') and holds them to the checks.
import { type Real, problems, settled } from '../runner.js';
import { MODEL_CLIENTS, type FaultSpan } from '../world.js';
import { type Counts, type Db, type Sent, checkBatch, checkDelivery, checkParcels, checkStrays, versionsAt } from './checks.js';
import { type Model, SETTLE_MS, areaOf, keyOf } from './model.js';

// Carried from one run to the next of this file's suite: a fault late in the
// last run can still hold this one up (checkBatch's `prompt`, checkStrays' spans).
let lastRunFaulted = false;
let lastRunSpans: FaultSpan[] = [];

/** No accepted parcel WAITING (each BATCHED, or WITHDRAWN) and every notice of the run's batches SENT, for a while (a late commit or send would show). */
function settle(m: Model, db: Db): Promise<boolean> {
  const codes = m.areas.map((a) => a.code);
  const trackingNos = m.parcels.map((x) => x.trackingNo);
  return settled(async () => {
    if (await db.parcel.count({ where: { trackingNo: { in: trackingNos }, status: 'WAITING' } })) return false;
    const ids = (await db.batch.findMany({ where: { areaCode: { in: codes } }, select: { id: true } })).map((b) => b.id);
    return (await db.notification.count({ where: { batchId: { in: ids }, status: { not: 'SENT' } } })) === 0;
  }, SETTLE_MS);
}

/** Each client's areas as its last PUT left them: another client's PUT of the same code changed none of them. */
async function checkAreas(m: Model, db: Db, p: ReturnType<typeof problems>): Promise<void> {
  const rows = await db.area.findMany({ where: { code: { in: [...new Set(m.areas.map((a) => a.code))] } } });
  for (const row of rows) {
    const area = areaOf(m, row.client, row.code);
    if (!area) p.add(`area ${row.code} of ${row.client}: never put by ${row.client}, yet it has a row`);
    else if (!versionsAt(area, Date.now()).some((v) => v.plate === row.vehiclePlate && v.contact === row.sorterContact))
      p.add(
        `area ${row.code} of ${row.client}: vehicle ${row.vehiclePlate} and sorter ${row.sorterContact}, its last put was ${JSON.stringify(area.versions.at(-1))}`,
      );
  }
  for (const a of m.areas) if (!rows.some((x) => x.client === a.client && x.code === a.code)) p.add(`area ${a.code} of ${a.client} is gone`);
}

export async function settleAndCheck(m: Model, r: Real): Promise<Record<string, number>> {
  const db = r.world.db;
  const calm = await settle(m, db);
  const codes = m.areas.map((a) => a.code);
  const batches = await db.batch.findMany({ where: { areaCode: { in: codes } } });
  const ids = batches.map((b) => b.id);
  const rows = await db.parcel.findMany({
    where: {
      OR: [
        { trackingNo: { in: [...m.parcels.map((x) => x.trackingNo), ...m.refused.map((x) => x.trackingNo)] } },
        { areaCode: { in: codes } },
        { batchId: { in: ids } },
      ],
    },
  });
  const contacts = m.areas.flatMap((a) => a.versions.map((v) => v.contact));
  const notes = await db.notification.findMany({ where: { OR: [{ batchId: { in: ids } }, { recipient: { in: contacts } }] } });
  const sent = r.world.webhook.delivered.map((c) => c.body as Sent);
  const p = problems();
  if (!calm) p.add(`not settled within ${SETTLE_MS} ms`);
  for (const n of notes)
    if (!n.batchId || !ids.includes(n.batchId)) p.add(`notice ${n.id} (${n.kind}) to ${n.recipient} for batch ${n.batchId}: no batch of this run`);
  await checkAreas(m, db, p);
  const second = MODEL_CLIENTS[1];
  const byId = new Map(batches.map((b) => [b.id, b]));
  const twinBatches = (t: string) => MODEL_CLIENTS.map((c) => rows.find((x) => keyOf(x) === keyOf({ client: c, trackingNo: t }))?.batchId);
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
    otherClientParcels: m.parcels.filter((x) => x.client === second).length,
    otherClientBatches: batches.filter((b) => b.client === second).length,
    sharedCodes: new Set(m.areas.filter((a) => a.client === second && areaOf(m, MODEL_CLIENTS[0], a.code)).map((a) => a.code)).size,
    twins: m.twins.length,
    // Two batches of two clients made at one moment (now(), of one statement): one commit for both.
    twinsOneCommit: m.twins.filter((t) => {
      const [x, y] = twinBatches(t).map((id) => (id ? byId.get(id) : undefined));
      return x && y && x.id !== y.id && x.createdAt.getTime() === y.createdAt.getTime();
    }).length,
    foreignUnknown: m.foreign.unknown,
    foreignOwn: m.foreign.own,
    foreignRefused: m.foreign.refused,
    foreignPut: m.foreign.put,
  };
  const faultless = Object.keys(r.run.faults).length === 0;
  const prompt = faultless && !lastRunFaulted;
  lastRunFaulted = !faultless;
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
  for (const [id, client] of m.batchIds) {
    const b = byId.get(id);
    if (!b) p.add(`batch ${id} was answered, and is no batch of this run's areas`);
    else if (b.client !== client) p.add(`batch ${id} of ${b.client} was answered to ${client}`);
  }
  p.throwIfAny(() => `run ${r.tag} (logs: ${r.world.saveLogs(r.tag)})`);
  return { ...counts, ...m.looks };
}
