// The appointments model suite's booking steps, each as one of the clients:
// bookings one at a time and several at once, booked again under their
// Idempotency-Key; OnAppt, the base of the steps that act on an appointment
// already booked.
import { OnPick, type Real, Step } from '../runner.js';
import type { ModelClient } from '../world.js';
import { type Appt, type Model, fail, open, startAt } from './model.js';

/**
 * Books `body` as `client` under Idempotency-Key `key` and opens its slot in
 * the model: a new appointment of `client`'s, or null if the booking came too
 * late for its start.
 */
export async function bookAs(m: Model, r: Real, client: ModelClient, key: string, body: Record<string, unknown>): Promise<Appt | null> {
  const startsAt = String(body.startsAt);
  const res = await r.world.httpAs(client).send('POST', '/appointments', body, { 'idempotency-key': key });
  if (res.status === 422 && res.body.code === 'STARTS_AT_IN_PAST' && res.receivedAt >= Date.parse(startsAt)) {
    // It landed after its start: retried through a database outage, or held
    // by a loaded host (appointments soak seed 311671832). Refused, nothing
    // written: a replay of a written booking answers as it was. One written
    // all the same (an attempt still in flight) shows here or, later, in
    // the check that the database holds no booking the model lacks.
    if ((await r.world.db.appointment.count({ where: { idempotencyKey: { endsWith: key }, client } })) > 0)
      fail(`book ${key} refused as past, yet written`, res);
    return null;
  }
  if (res.status !== 201) fail(`book as ${client} (${res.attempts} attempts, answered ${res.receivedAt - Date.parse(startsAt)} ms from its start)`, res);
  if (res.body.startsAt !== startsAt) fail(`book at ${startsAt}`, res);
  const leadMs = Number(body.remindBeforeSeconds) * 1_000;
  const a: Appt = {
    id: String(res.body.id),
    client,
    key,
    body,
    leadMs,
    cancelled: false,
    current: startsAt,
    slots: new Map(),
    foreign: { move: 0, cancel: 0 },
  };
  open(a, startsAt, res.firstSentAt, Date.parse(String(res.body.remindAt)));
  m.appts.push(a);
  return a;
}

/** Books, as `client`, one appointment whose remind time lies `offsetMs` from now, under a new key. */
export async function book(m: Model, r: Real, client: ModelClient, leadSeconds: number, offsetMs: number): Promise<Appt | null> {
  const key = `${r.tag}-a${m.books++}`;
  const startsAt = startAt(leadSeconds * 1_000, offsetMs);
  const body = { customerId: r.tag, contact: `${key}@example.com`, channel: 'email', startsAt, remindBeforeSeconds: leadSeconds };
  return bookAs(m, r, client, key, body);
}

export class Book extends Step<Model> {
  constructor(
    readonly leadSeconds: number,
    readonly offsetMs: number,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    await book(m, r, this.as, this.leadSeconds, this.offsetMs);
  }
  toString() {
    return `Book(lead ${this.leadSeconds}s, remind in ${this.offsetMs} ms, ${this.as})`;
  }
}

/**
 * Several bookings at once whose remind times fall together: their reminder
 * jobs come due in one claim and are written by one statement (the batch
 * handler), or by one pass's page; moves and cancels of some of them may race it.
 */
export class BookMany extends Step<Model> {
  constructor(
    readonly count: number,
    readonly leadSeconds: number,
    readonly offsetMs: number,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    await Promise.all(Array.from({ length: this.count }, () => book(m, r, this.as, this.leadSeconds, this.offsetMs)));
  }
  toString() {
    return `BookMany(${this.count}, lead ${this.leadSeconds}s, remind in ${this.offsetMs} ms, ${this.as})`;
  }
}

export abstract class OnAppt extends OnPick<Model, Appt> {
  protected list(m: Readonly<Model>) {
    return m.appts;
  }
  appt(m: Model): Appt {
    return this.picked(m);
  }
}

export class RepeatBook extends OnAppt {
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const res = await r.world.httpAs(a.client).send('POST', '/appointments', a.body, { 'idempotency-key': a.key });
    if (res.status !== 201 || res.body.id !== a.id) fail(`repeated booking of ${a.id}`, res);
  }
  toString() {
    return `RepeatBook(${this.pick})`;
  }
}
