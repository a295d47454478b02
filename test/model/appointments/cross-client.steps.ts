// The appointments model suite's cross-client steps: the client that did not
// book an appointment reads it, moves it, cancels it, lists its
// notifications, and books under the same Idempotency-Key value. Each foreign
// request is answered at once as for an id no appointment has, and the model
// is left as it was: what the owner's steps and the settled check see after
// holds that nothing changed.
import type { Real } from '../runner.js';
import { OnAppt, bookAs } from './book.steps.js';
import { type Appt, MIN_AHEAD_MS, type Model, asUnknown, noneListed, notFound, otherClient } from './model.js';

/**
 * How many of the latest appointments a `recent` step picks from: those most
 * likely still BOOKED with their reminder not yet sent, which a missing
 * client condition in a move or cancel would change.
 */
const RECENT = 3;
/** Where the other client tries to move an appointment: far enough ahead that no retried request lands past it. */
const FOREIGN_MOVE_AHEAD_MS = 3_600_000;

/** Acts on one of the run's appointments, or (`recent`) one of its latest. */
abstract class OnSomeAppt extends OnAppt {
  constructor(
    pick: number,
    readonly recent: boolean,
  ) {
    super(pick);
  }
  protected override list(m: Readonly<Model>): Appt[] {
    return this.recent ? m.appts.slice(-RECENT) : m.appts;
  }
  protected label(name: string) {
    return `${name}(${this.pick}${this.recent ? ', recent' : ''})`;
  }
}

export class ForeignRead extends OnSomeAppt {
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const http = r.world.httpAs(otherClient(a.client));
    await asUnknown(a, r, 'get', (id) => http.send('GET', `/appointments/${id}`), notFound);
  }
  toString() {
    return this.label('ForeignRead');
  }
}

export class ForeignMove extends OnSomeAppt {
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const http = r.world.httpAs(otherClient(a.client));
    const startsAt = new Date(Date.now() + FOREIGN_MOVE_AHEAD_MS).toISOString();
    a.foreign.move++;
    await asUnknown(a, r, 'move', (id) => http.send('PATCH', `/appointments/${id}`, { startsAt }), notFound);
  }
  toString() {
    return this.label('ForeignMove');
  }
}

export class ForeignCancel extends OnSomeAppt {
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const http = r.world.httpAs(otherClient(a.client));
    a.foreign.cancel++;
    await asUnknown(a, r, 'cancel', (id) => http.send('POST', `/appointments/${id}/cancel`), notFound);
  }
  toString() {
    return this.label('ForeignCancel');
  }
}

/**
 * The other client lists an appointment's notifications: none, as for an
 * unknown id. Picked among those whose reminder is due (written, or about
 * to be: rows a missing client filter would show), while any is.
 */
export class ForeignNotifications extends OnAppt {
  protected override list(m: Readonly<Model>): Appt[] {
    const due = m.appts.filter((a) => [...a.slots.values()].some((held) => held.some((h) => h.remindAt < Date.now())));
    return due.length ? due : m.appts;
  }
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const http = r.world.httpAs(otherClient(a.client));
    await asUnknown(a, r, 'notifications', (id) => http.send('GET', `/notifications?appointmentId=${id}`), noneListed);
  }
  toString() {
    return `ForeignNotifications(${this.pick})`;
  }
}

/**
 * The other client books under the Idempotency-Key value of an appointment,
 * with the same body: a new appointment of its own (keys are its own), never
 * a replay of the other's.
 */
export class ForeignRepeatBook extends OnAppt {
  // Only a key value the other client has not used (under one of its own it
  // would replay its own booking), of a start still ahead (or it is refused).
  protected override list(m: Readonly<Model>): Appt[] {
    return m.appts.filter(
      (a) => Date.parse(String(a.body.startsAt)) > Date.now() + MIN_AHEAD_MS + 600 && !m.appts.some((x) => x.key === a.key && x.client !== a.client),
    );
  }
  async act(m: Model, r: Real) {
    // The list is drawn from just before: a start may have come too near since.
    if (this.list(m).length === 0) return;
    const a = this.appt(m);
    const mine = await bookAs(m, r, otherClient(a.client), a.key, a.body);
    if (mine?.id === a.id) throw new Error(`booking by ${mine.client} under the Idempotency-Key of ${a.id} (of ${a.client}) replayed that appointment`);
  }
  toString() {
    return `ForeignRepeatBook(${this.pick})`;
  }
}
