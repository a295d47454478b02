// The notifications model suite's steps: notifications made, as either of
// two clients, by a customer's cancel and by a reminder due at once, an
// operator's redrives (one, and two of one job at once), a second delivery of
// a row while its call runs, a notification whose receiver's body comes
// slowly after a fast success, the other client listing a subject's
// notifications, and an operator pausing and resuming the queue (all of it,
// or only its delivery type).
import type { Reply } from '../../chaos/drivers/http.js';
import { DELIVER_JOB, deliverJobId } from '../../../src/modules/notifications/notifications.jobs.js';
import { OnPick, type Real, Step, admin, dbRead, fail } from '../runner.js';
import { MODEL_ADMIN_TOKEN, MODEL_CLIENTS, type ModelClient } from '../world.js';

/** A business event and its subject (an order, an appointment), made by `client`. */
export type Event = { kind: 'order' | 'reminder'; subject: string; client: ModelClient };
/** A pause of the queue (`whole`) or of its delivery type: from its answer to the start of its resume (null: still paused). */
export type Pause = { whole: boolean; from: number; to: number | null };
export type Model = { events: Event[]; redrives: { id: string; at: number }[]; pauses: Pause[] };

/** An order cancelled by its customer: one ORDER_CANCELLED notification. */
export class CancelOrder extends Step<Model> {
  constructor(readonly as: ModelClient) {
    super();
  }
  async act(m: Model, r: Real) {
    const http = r.world.httpAs(this.as);
    const created = await http.send(
      'POST',
      '/orders',
      { customerId: r.tag, items: [{ sku: 'N', quantity: 1, unitPriceCents: 5 }], paymentTimeoutSeconds: 600 },
      {
        'idempotency-key': `${r.tag}-n${m.events.length}`,
      },
    );
    if (created.status !== 201) fail(`create as ${this.as}`, created);
    const cancelled = await http.send('POST', `/orders/${String(created.body.id)}/cancel`);
    if (cancelled.status !== 200) fail('cancel', cancelled);
    m.events.push({ kind: 'order', subject: String(created.body.id), client: this.as });
  }
  toString() {
    return `CancelOrder(${this.as})`;
  }
}

/** A booking whose remind time has passed: one reminder, at once. */
export class RemindNow extends Step<Model> {
  constructor(readonly as: ModelClient) {
    super();
  }
  async act(m: Model, r: Real) {
    const res = await r.world.httpAs(this.as).send(
      'POST',
      '/appointments',
      {
        customerId: r.tag,
        contact: '+447911123456',
        channel: 'sms',
        startsAt: new Date(Date.now() + 600_000).toISOString(),
        remindBeforeSeconds: 3_600,
      },
      { 'idempotency-key': `${r.tag}-n${m.events.length}` },
    );
    if (res.status !== 201) fail(`book as ${this.as}`, res);
    m.events.push({ kind: 'reminder', subject: String(res.body.id), client: this.as });
  }
  toString() {
    return `RemindNow(${this.as})`;
  }
}

/** An operator redrives one of the run's FAILED notifications (its delivery job is dead). */
export class Redrive extends Step<Model> {
  constructor(readonly pick: number) {
    super();
  }
  override check(m: Readonly<Model>) {
    return m.events.length > 0;
  }
  async act(m: Model, r: Real) {
    const failed = await r.world.db.notification.findMany({ where: subjectsOf(m), select: { id: true, status: true } });
    const candidates = failed.filter((n) => n.status === 'FAILED');
    if (candidates.length === 0) return;
    const n = candidates[this.pick % candidates.length]!;
    const at = Date.now();
    const answers = await this.redrive(r, n.id);
    // The job may not be dead yet (its row is FAILED just before the nack) or was trimmed: 404 then.
    for (const res of answers) if (res.status !== 200 && res.status !== 404) fail(`redrive of ${n.id}`, res);
    if (answers.some((res) => res.status === 200)) m.redrives.push({ id: n.id, at });
  }
  protected async redrive(r: Real, id: string): Promise<Reply[]> {
    return [await admin(r, 'POST', `notifications/dead/${encodeURIComponent(deliverJobId(id))}/redrive`)];
  }
  toString() {
    return `Redrive(${this.pick})`;
  }
}

export const subjectsOf = (m: Model) => ({
  OR: [
    { orderId: { in: m.events.filter((e) => e.kind === 'order').map((e) => e.subject) } },
    { appointmentId: { in: m.events.filter((e) => e.kind === 'reminder').map((e) => e.subject) } },
  ],
});

/** How long RunNowDuringCall looks for its notification's call. */
const LOOK_MS = 2_000;

/**
 * Two deliveries of one row at once: a new notification, the receiver slow
 * (as a Receiver step sets it, and it stays so), and once its row is SENDING
 * an operator runs its delivery job now. The second delivery must wait for
 * the call running (the row is claimed again only once that call is stale):
 * the receiver is called once.
 */
export class RunNowDuringCall extends Step<Model> {
  constructor(readonly as: ModelClient) {
    super();
  }
  async act(m: Model, r: Real) {
    r.world.receiver('slowOk');
    await new CancelOrder(this.as).act(m, r);
    const orderId = m.events.at(-1)!.subject;
    const end = Date.now() + LOOK_MS;
    for (;;) {
      const n = await dbRead(() => r.world.db.notification.findFirst({ where: { orderId }, select: { id: true, status: true } }));
      if (n?.status === 'SENDING') {
        const res = await admin(r, 'POST', `notifications/jobs/${encodeURIComponent(deliverJobId(n.id))}/run-now`);
        // 404: the call ended and its job with it.
        if (res.status !== 200 && res.status !== 404) fail(`run-now of ${n.id}'s delivery`, res);
        return;
      }
      if (Date.now() > end || (n && n.status !== 'PENDING')) return;
      await new Promise((res) => setTimeout(res, 10));
    }
  }
  toString() {
    return `RunNowDuringCall(${this.as})`;
  }
}

/** A notification made while the receiver answers its status at once and ends its body past the call's timeout: a success, called once. */
export class SlowBodyNotice extends Step<Model> {
  constructor(readonly as: ModelClient) {
    super();
  }
  async act(m: Model, r: Real) {
    r.world.receiver('slowBody');
    await new CancelOrder(this.as).act(m, r);
  }
  toString() {
    return `SlowBodyNotice(${this.as})`;
  }
}

/** An operator redrives one FAILED notification's dead job twice at once: it is sent once. */
export class RedriveTwice extends Redrive {
  protected override async redrive(r: Real, id: string): Promise<Reply[]> {
    return Promise.all([0, 1].map(() => admin(r, 'POST', `notifications/dead/${encodeURIComponent(deliverJobId(id))}/redrive`)));
  }
  override toString() {
    return `RedriveTwice(${this.pick})`;
  }
}

/** The subject filter of GET /notifications for an event. */
const filterOf = (e: Event) => (e.kind === 'order' ? `orderId=${e.subject}` : `appointmentId=${e.subject}`);

/**
 * The other client lists an event's notifications: none, as an id nothing
 * has. Its own client lists them too: an order's, written with its cancel,
 * is there; a reminder's, once written.
 */
export class ForeignList extends OnPick<Model, Event> {
  protected list(m: Readonly<Model>) {
    return m.events;
  }
  async act(m: Model, r: Real) {
    const e = this.picked(m);
    const other = r.world.httpAs(MODEL_CLIENTS.find((c) => c !== e.client) as ModelClient);
    const res = await other.send('GET', `/notifications?${filterOf(e)}`);
    const by = `notifications of ${e.kind} ${e.subject} (of ${e.client}) listed by the other client`;
    if (res.status !== 200 || JSON.stringify(res.body) !== JSON.stringify({ notifications: [] })) fail(by, res);
    const own = await r.world.httpAs(e.client).send('GET', `/notifications?${filterOf(e)}`);
    const listed = own.status === 200 ? (own.body.notifications as unknown[]).length : -1;
    if (listed !== 1 && !(e.kind === 'reminder' && listed === 0)) fail(`notifications of ${e.kind} ${e.subject} listed by its client`, own);
  }
  toString() {
    return `ForeignList(${this.pick})`;
  }
}

/** How long an operator keeps asking when the admin API answers a fault (a 503 while Redis restarts). */
const OPERATOR_RETRY_MS = 15_000;

/** An operator's pause or resume, asked again until it is answered 200 (idempotent, as the API says). */
async function control(r: Real, action: 'pause' | 'resume', whole: boolean): Promise<Reply> {
  const body = whole ? { by: 'model', reason: r.tag } : { type: DELIVER_JOB, by: 'model', reason: r.tag };
  const end = Date.now() + OPERATOR_RETRY_MS;
  for (;;) {
    const res = await r.world.http.send('POST', `/admin/queues/notifications/${action}`, body, { authorization: `Bearer ${MODEL_ADMIN_TOKEN}` });
    if (res.status === 200 || Date.now() > end) return res;
    await new Promise((done) => setTimeout(done, 250));
  }
}

/** The open pause of the model, if any. */
export const openPause = (m: Readonly<Model>): Pause | undefined => m.pauses.find((p) => p.to === null);

/**
 * How long after a pause's answer a delivery may still reach the receiver:
 * one whose handler was already running, or whose claim was on its way (a
 * claimed job not started is handed back at the pause's announcement).
 */
export const PAUSE_GRACE_MS = 1_000;

/** An operator pauses the notifications queue, or only its delivery jobs: from the answer on, no delivery starts. */
export class PauseQueue extends Step<Model> {
  constructor(readonly whole: boolean) {
    super();
  }
  override check(m: Readonly<Model>) {
    return openPause(m) === undefined;
  }
  async act(m: Model, r: Real) {
    const res = await control(r, 'pause', this.whole);
    if (res.status !== 200) fail('pause', res);
    const held = this.whole ? res.body.paused === true : (res.body.pausedTypes as string[]).includes(DELIVER_JOB);
    if (!held) fail('pause (state after it)', res);
    m.pauses.push({ whole: this.whole, from: Date.now(), to: null });
  }
  toString() {
    return `PauseQueue(${this.whole ? 'queue' : 'deliveries'})`;
  }
}

/** The operator resumes what was paused: the backlog is delivered (the settle check sees every row end). */
export class ResumeQueue extends Step<Model> {
  override check(m: Readonly<Model>) {
    return openPause(m) !== undefined;
  }
  async act(m: Model, r: Real) {
    await resumeOpenPause(m, r);
  }
  toString() {
    return 'ResumeQueue';
  }
}

/** Resumes the model's open pause (a step, and the end of every run). */
export async function resumeOpenPause(m: Model, r: Real): Promise<void> {
  const open = openPause(m);
  if (!open) return;
  open.to = Date.now();
  const res = await control(r, 'resume', open.whole);
  if (res.status !== 200) fail('resume', res);
  const held = open.whole ? res.body.paused === true : (res.body.pausedTypes as string[]).includes(DELIVER_JOB);
  if (held) fail('resume (state after it)', res);
}

/**
 * Aimed at the pause's rule: a pause, then (past the grace) new notifications
 * while paused, a wait in which none may be delivered, and the resume, after
 * which they must all be (the settle check).
 */
export class PausedBurst extends Step<Model> {
  constructor(
    readonly whole: boolean,
    readonly as: ModelClient,
  ) {
    super();
  }
  override check(m: Readonly<Model>) {
    return openPause(m) === undefined;
  }
  async act(m: Model, r: Real) {
    await new PauseQueue(this.whole).act(m, r);
    await new Promise((done) => setTimeout(done, PAUSE_GRACE_MS + 200));
    await new CancelOrder(this.as).act(m, r);
    await new RemindNow(this.as).act(m, r);
    await new Promise((done) => setTimeout(done, 1_000));
    await resumeOpenPause(m, r);
  }
  toString() {
    return `PausedBurst(${this.whole ? 'queue' : 'deliveries'}, ${this.as})`;
  }
}
