// The appointments model suite's several-lead bookings: booked with a list of
// leads (or with one lead as a number, the one-lead form, then given a list),
// moved (to a new slot or back), given a new list (leads dropped, added,
// kept), cancelled, and a list changed while one of its reminders' call runs. The model keeps, per slot and lead, when the appointment held
// it and the remind time its answer gave (Infinity: skipped, its time had
// passed while another reminder was still to come: no reminder owed, none
// allowed).
import type { Reply } from '../../chaos/drivers/http.js';
import { OnPick, type Real, Step, dbRead } from '../runner.js';
import type { ModelClient } from '../world.js';
import { type Held, MIN_AHEAD_MS, type Model, fail, startAt } from './model.js';

export type MultiAppt = {
  id: string;
  client: ModelClient;
  leads: number[];
  cancelled: boolean;
  current: string;
  /** Per slot and lead (holdKey), its holds. */
  holds: Map<string, Held[]>;
  /**
   * Booked with one lead as a number: that lead. A reminder written in that
   * form names no lead (its payload has no leadSeconds): it is this lead's,
   * on its slot, for the life of the booking there (the key lead).
   */
  oneLead?: number;
  /** Still stored in the one-lead form (no list given yet). */
  oneLeadForm?: boolean;
};

/** The lead a reminder row is for: its payload's, or the one-lead form's lead (the key lead). */
export const leadOfRow = (a: MultiAppt, payload: unknown): number => (payload as { leadSeconds?: number }).leadSeconds ?? a.oneLead ?? -1;

export const holdKey = (startsAt: string, lead: number) => `${startsAt}#${lead}`;
/** A list of leads as the service keeps it: distinct, longest first. */
const normal = (leads: readonly number[]) => [...new Set(leads)].sort((x, y) => y - x);

type LeadJson = { leadSeconds: number; remindAt: string | null };

/** Opens the hold of lead `l` of the slot `a` holds, from `from`, at the remind time the answer gave. */
function openLead(a: MultiAppt, l: LeadJson, from: number): void {
  const key = holdKey(a.current, l.leadSeconds);
  const list = a.holds.get(key) ?? [];
  list.push({ from, untilLow: Infinity, untilHigh: Infinity, remindAt: l.remindAt === null ? Infinity : Date.parse(l.remindAt) });
  a.holds.set(key, list);
}
function closeLead(a: MultiAppt, lead: number, low: number, high: number): void {
  const h = a.holds.get(holdKey(a.current, lead))?.at(-1);
  if (h && h.untilLow === Infinity) {
    h.untilLow = low;
    h.untilHigh = high;
  }
}

/** The answer's leads: the list asked, longest first, each planned no earlier than the start less the lead. */
function leadsOf(res: Reply, what: string, asked: readonly number[]): LeadJson[] {
  const leads = res.body.leads as LeadJson[];
  const start = Date.parse(String(res.body.startsAt));
  if (JSON.stringify(leads.map((l) => l.leadSeconds)) !== JSON.stringify(normal(asked))) fail(`${what}: leads ${normal(asked).join(',')}`, res);
  for (const l of leads)
    if (l.remindAt !== null && Date.parse(l.remindAt) < start - l.leadSeconds * 1_000) fail(`${what}: lead ${l.leadSeconds} planned early`, res);
  return leads;
}

export async function bookLeads(
  m: Model,
  r: Real,
  client: ModelClient,
  leads: readonly number[],
  offsetMs: number,
  asNumber = false,
): Promise<MultiAppt | null> {
  const key = `${r.tag}-l${m.books++}`;
  const startsAt = startAt(Math.max(...leads) * 1_000, offsetMs);
  const oneLead = asNumber && leads.length === 1 ? leads[0] : undefined;
  const body = { customerId: r.tag, contact: `${key}@example.com`, channel: 'email', startsAt, remindBeforeSeconds: oneLead ?? leads };
  const res = await r.world.httpAs(client).send('POST', '/appointments', body, { 'idempotency-key': key });
  if (res.status === 422 && res.body.code === 'STARTS_AT_IN_PAST' && res.receivedAt >= Date.parse(startsAt)) {
    if ((await r.world.db.appointment.count({ where: { idempotencyKey: { endsWith: key }, client } })) > 0)
      fail(`book ${key} refused as past, yet written`, res);
    return null;
  }
  if (res.status !== 201 || res.body.startsAt !== startsAt) fail(`book leads ${leads.join(',')} as ${client}`, res);
  const a: MultiAppt = {
    id: String(res.body.id),
    client,
    leads: normal(leads),
    cancelled: false,
    current: startsAt,
    holds: new Map(),
    ...(oneLead !== undefined && { oneLead, oneLeadForm: true }),
  };
  for (const l of leadsOf(res, `book ${a.id}`, leads)) openLead(a, l, res.firstSentAt);
  m.multi.push(a);
  return a;
}

export class BookLeads extends Step<Model> {
  constructor(
    readonly leads: readonly number[],
    readonly offsetMs: number,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    await bookLeads(m, r, this.as, this.leads, this.offsetMs);
  }
  toString() {
    return `BookLeads([${this.leads.join(', ')}], remind in ${this.offsetMs} ms, ${this.as})`;
  }
}

/**
 * One lead sent as a number (the one-lead form), then, after `afterMs` (its
 * reminder written by then when it was due at once), given the list `then`
 * (with its one lead added when `then` is that lead alone's replacement): the
 * one-lead reminder, naming no lead, stays its lead's; the others get theirs.
 */
export class BookOneLead extends Step<Model> {
  constructor(
    readonly lead: number,
    readonly offsetMs: number,
    readonly as: ModelClient,
    readonly then: readonly number[],
    readonly afterMs: number,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const a = await bookLeads(m, r, this.as, [this.lead], this.offsetMs, true);
    if (!a || this.then.length === 0) return;
    await new Promise((done) => setTimeout(done, this.afterMs));
    await new ChangeLeads(m.multi.indexOf(a), this.then).act(m, r);
  }
  toString() {
    return `BookOneLead(${this.lead}, remind in ${this.offsetMs} ms, ${this.as}, then [${this.then.join(', ')}] after ${this.afterMs} ms)`;
  }
}

abstract class OnMulti extends OnPick<Model, MultiAppt> {
  protected list(m: Readonly<Model>) {
    return m.multi;
  }
}

function refusedAsCancelled(a: MultiAppt, res: Reply, what: string): boolean {
  if (res.status !== 409 || res.body.code !== 'APPOINTMENT_CANCELLED') return false;
  if (!a.cancelled) fail(`${what}: refused as cancelled, never cancelled`, res);
  return true;
}

/** Applies a move's answer: every lead of the old slot left, every lead of the new one held. */
function applyMoveLeads(a: MultiAppt, to: string, res: Reply): void {
  if (refusedAsCancelled(a, res, `move of ${a.id}`)) return;
  if (res.status !== 200 || res.body.startsAt !== to || a.cancelled) fail(`move of ${a.id} to ${to}`, res);
  if (to === a.current) return;
  for (const lead of a.leads) closeLead(a, lead, res.firstSentAt, res.receivedAt);
  a.current = to;
  for (const l of leadsOf(res, `move of ${a.id}`, a.leads)) openLead(a, l, res.firstSentAt);
}

/** Applies a lead list change's answer: the slot kept; dropped leads left, added ones held, kept ones held still. */
function applyLeads(a: MultiAppt, leads: readonly number[], res: Reply): void {
  if (refusedAsCancelled(a, res, `lead change of ${a.id}`)) return;
  if (res.status !== 200 || res.body.startsAt !== a.current || a.cancelled) fail(`lead change of ${a.id} to ${leads.join(',')}`, res);
  const next = leadsOf(res, `lead change of ${a.id}`, leads);
  for (const lead of a.leads) if (!next.some((l) => l.leadSeconds === lead)) closeLead(a, lead, res.firstSentAt, res.receivedAt);
  for (const l of next) if (!a.leads.includes(l.leadSeconds)) openLead(a, l, res.firstSentAt);
  a.leads = normal(leads);
  if (a.leads.length > 1) a.oneLeadForm = false;
}

export class MoveLeads extends OnMulti {
  constructor(
    pick: number,
    readonly back: number | null,
    readonly offsetMs: number,
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const a = this.picked(m);
    const earlier = [...new Set([...a.holds.keys()].map((k) => k.split('#')[0]!))].filter(
      (s) => s !== a.current && Date.parse(s) > Date.now() + MIN_AHEAD_MS + 600,
    );
    const to = this.back !== null && earlier.length ? earlier[this.back % earlier.length]! : startAt(Math.max(...a.leads) * 1_000, this.offsetMs);
    const res = await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { startsAt: to });
    // Retried until its start passed: whether an earlier attempt moved it is unclear; left to the end's checks.
    if (res.status === 422 && res.body.code === 'STARTS_AT_IN_PAST' && res.attempts > 1) throw new Error(`move of ${a.id} retried past its start: unclear`);
    applyMoveLeads(a, to, res);
  }
  toString() {
    return this.back === null ? `MoveLeads(${this.pick}, remind in ${this.offsetMs} ms)` : `MoveLeadsBack(${this.pick}, ${this.back})`;
  }
}

export class ChangeLeads extends OnMulti {
  constructor(
    pick: number,
    readonly leads: readonly number[],
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const a = this.picked(m);
    // A one-lead booking's one lead is not changed for another alone: in that
    // form its one reminder stands for the slot whatever its lead becomes,
    // which these per-lead rules do not model. It is given a list.
    const leads = a.oneLeadForm && a.oneLead !== undefined && this.leads.length === 1 && this.leads[0] !== a.oneLead ? [...this.leads, a.oneLead] : this.leads;
    applyLeads(a, leads, await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { remindBeforeSeconds: leads }));
  }
  toString() {
    return `ChangeLeads(${this.pick}, [${this.leads.join(', ')}])`;
  }
}

export class CancelLeads extends OnMulti {
  async act(m: Model, r: Real) {
    const a = this.picked(m);
    const res = await r.world.httpAs(a.client).send('POST', `/appointments/${a.id}/cancel`);
    if (res.status !== 200 || res.body.status !== 'CANCELLED') fail(`cancel of ${a.id}`, res);
    if (!a.cancelled) for (const lead of a.leads) closeLead(a, lead, res.firstSentAt, res.receivedAt);
    a.cancelled = true;
  }
  toString() {
    return `CancelLeads(${this.pick})`;
  }
}

/**
 * Two leads, the first due at once: while its reminder's call runs, the list
 * becomes `then` (the first lead dropped or kept, others added): the running
 * call decides its row (SENT if it went through), a dropped lead's reminder
 * not yet written is never sent, an added lead ahead gets its reminder.
 */
export class LeadsDuringCall extends Step<Model> {
  constructor(
    readonly then: readonly number[],
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    // The first lead (4 s) due in a moment (ahead when booked, or it would be skipped), the second (1 s) 3 s later.
    const a = await bookLeads(m, r, this.as, [4, 1], 400);
    if (!a) return;
    const end = Date.now() + 2_000;
    for (;;) {
      const n = await dbRead(() => r.world.db.notification.findFirst({ where: { appointmentId: a.id }, select: { status: true, attempts: true } }));
      if (n && (n.status === 'SENDING' || n.attempts > 0)) break;
      if (Date.now() > end) return;
      await new Promise((res) => setTimeout(res, 10));
    }
    m.leads.duringCall++;
    applyLeads(a, this.then, await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { remindBeforeSeconds: this.then }));
  }
  toString() {
    return `LeadsDuringCall([4, 1] -> [${this.then.join(', ')}], ${this.as})`;
  }
}

/**
 * Aimed at the take-back per slot and lead: booked with every lead passed
 * (one reminder at once, the shortest lead's), moved away while its call
 * fails or runs, and straight back: the slot and lead held again must take
 * its withdrawn reminder back (or a running call decide), 10 s ahead so a
 * loaded host still reaches the call and the move back before the start.
 */
export class LeadsAwayAndBack extends Step<Model> {
  constructor(
    readonly receiver: 'fail' | 'slowOk',
    readonly awayOffsetMs: number,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    r.world.receiver(this.receiver);
    const startInMs = 10_000;
    const lead = Math.ceil(startInMs / 1_000) + 1;
    const a = await bookLeads(m, r, this.as, [lead + 1, lead], startInMs - (lead + 1) * 1_000);
    if (!a) return;
    const home = a.current;
    const end = Date.now() + 5_000;
    for (;;) {
      const n = await dbRead(() => r.world.db.notification.findFirst({ where: { appointmentId: a.id }, select: { status: true, attempts: true } }));
      if (n && (n.status === 'SENDING' || n.attempts > 0)) break;
      if (Date.now() > end) return;
      await new Promise((res) => setTimeout(res, 10));
    }
    const away = startAt((lead + 1) * 1_000, this.awayOffsetMs);
    applyMoveLeads(a, away, await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { startsAt: away }));
    applyMoveLeads(a, home, await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { startsAt: home }));
  }
  toString() {
    return `LeadsAwayAndBack(${this.receiver}, away to remind in ${this.awayOffsetMs} ms, ${this.as})`;
  }
}
