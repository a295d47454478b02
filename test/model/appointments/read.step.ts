// The appointments model suite's reading step: an appointment read back by its
// client, its status and start held to the model's and its reminders to one
// per slot.
import type { Real } from '../runner.js';
import { OnAppt } from './book.steps.js';
import { type Model, fail } from './model.js';

export class Read extends OnAppt {
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const res = await r.world.httpAs(a.client).send('GET', `/appointments/${a.id}`);
    if (res.status !== 200) fail(`get ${a.id}`, res);
    if (res.body.status !== (a.cancelled ? 'CANCELLED' : 'BOOKED')) fail(`get ${a.id}`, res);
    // Only its own client's answered moves put it elsewhere (the other's, each answered 404, moved nothing).
    if (res.body.startsAt !== a.current) fail(`get ${a.id}: at ${a.current} by the model`, res);
    const slots = (res.body.reminders as { startsAt: string }[]).map((x) => x.startsAt);
    if (new Set(slots).size !== slots.length) fail(`get ${a.id}: two reminders for one slot`, res);
  }
  toString() {
    return `Read(${this.pick})`;
  }
}
