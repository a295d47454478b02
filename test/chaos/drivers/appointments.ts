// Appointments load: bookings whose reminders fall due a few seconds later,
// each left alone, moved, cancelled, or moved then cancelled at a random moment
// around its remind time. Records the slots each appointment held and when it
// gave them up.
import { type Http, rand, sleepUntil } from './http.js';

export type Slot = {
  /** ISO instant, as the API and the reminder payload spell it. */
  startsAt: string;
  /**
   * The earliest remind time the database held for the slot (ms since epoch):
   * the answer's remindAt, or after a retried move, which may have committed
   * earlier and got an earlier clamp to now(), startsAt - lead.
   */
  remindAt: number;
  /** When the slot was taken: the booking's createdAt, or when the move's answer arrived. */
  heldFrom: number;
  /**
   * When the slot was given up, as bounds in this machine's clock (the one
   * PostgreSQL uses too): not before the change request was first sent, not
   * after its answer arrived. Infinity while the slot is held. (The answer's
   * updatedAt is its statement's start, which may precede the moment the
   * change took effect: a reminder committed while the change waited for the
   * row lock can carry a later created_at.)
   */
  heldUntilLow: number;
  heldUntilHigh: number;
};

export type AppointmentsLoad = {
  tag: string;
  count: number;
  spreadMs: number;
  /** Reminder lead (remindBeforeSeconds). */
  leadSeconds: number;
  /** A booking's first remind time lies this far after the booking request (ms). */
  firstRemindMs: readonly [number, number];
  /** Changes are sent at the current remind time + U(-jitter, +jitter) ms. */
  changeJitterMs: number;
  /** Shifts the change moments (ms, negative: earlier); default 0. */
  changeBiasMs?: number;
  /** Told each slot's remind time (ms since epoch), as soon as it is known. */
  onDue?: (at: number) => void;
};

export async function driveAppointments(http: Http, load: AppointmentsLoad): Promise<Map<string, Slot[]>> {
  const history = new Map<string, Slot[]>();
  const t0 = Date.now();

  async function lifeOf(i: number): Promise<void> {
    await sleepUntil(t0 + (i * load.spreadMs) / load.count);
    const startsAt = new Date(Date.now() + load.leadSeconds * 1_000 + rand(...load.firstRemindMs));
    const booked = await http.send(
      'POST',
      '/appointments',
      {
        customerId: `${load.tag}-${i}`,
        contact: `${load.tag}-${i}@example.com`,
        channel: 'email',
        startsAt: startsAt.toISOString(),
        remindBeforeSeconds: load.leadSeconds,
      },
      { 'idempotency-key': `${load.tag}-appt-${i}` },
    );
    if (booked.status !== 201) throw new Error(`appointment ${i}: booking answered ${booked.status} ${JSON.stringify(booked.body)}`);
    const id = String(booked.body.id);
    const slots: Slot[] = [
      {
        startsAt: String(booked.body.startsAt),
        remindAt: Date.parse(String(booked.body.remindAt)),
        heldFrom: Date.parse(String(booked.body.createdAt)),
        heldUntilLow: Infinity,
        heldUntilHigh: Infinity,
      },
    ];
    history.set(id, slots);
    load.onDue?.((slots[0] as Slot).remindAt);

    const change = async (kind: 'move' | 'cancel') => {
      const current = slots[slots.length - 1] as Slot;
      await sleepUntil(current.remindAt + (load.changeBiasMs ?? 0) + rand(-load.changeJitterMs, load.changeJitterMs));
      if (kind === 'cancel') {
        const c = await http.send('POST', `/appointments/${id}/cancel`);
        if (c.status !== 200) throw new Error(`appointment ${id}: cancel answered ${c.status} ${JSON.stringify(c.body)}`);
        current.heldUntilLow = c.firstSentAt;
        current.heldUntilHigh = c.receivedAt;
        return;
      }
      const next = new Date(Date.parse(current.startsAt) + rand(500, 1_500)).toISOString();
      let m = await http.send('PATCH', `/appointments/${id}`, { startsAt: next });
      if (m.status === 422 && m.body.code === 'STARTS_AT_IN_PAST' && m.attempts > 1) {
        // Retried until the new start had passed: an earlier attempt may have committed.
        const g = await http.send('GET', `/appointments/${id}`);
        if (g.status !== 200) throw new Error(`appointment ${id}: read answered ${g.status} ${JSON.stringify(g.body)}`);
        if (g.body.startsAt !== next) return; // the move never happened: the slot is still held
        m = { ...g, attempts: m.attempts, firstSentAt: m.firstSentAt };
      }
      if (m.status !== 200) throw new Error(`appointment ${id}: move answered ${m.status} ${JSON.stringify(m.body)}`);
      current.heldUntilLow = m.firstSentAt;
      current.heldUntilHigh = m.receivedAt;
      const remindAt = Date.parse(String(m.body.remindAt));
      const earliest = m.attempts === 1 ? remindAt : Math.min(remindAt, Date.parse(next) - load.leadSeconds * 1_000);
      slots.push({ startsAt: String(m.body.startsAt), remindAt: earliest, heldFrom: m.receivedAt, heldUntilLow: Infinity, heldUntilHigh: Infinity });
      load.onDue?.(earliest);
    };

    const plan = Math.random();
    if (plan < 0.25) return; // left alone
    if (plan < 0.6) return change('move');
    if (plan < 0.85) return change('cancel');
    await change('move');
    await change('cancel');
  }

  await Promise.all(Array.from({ length: load.count }, (_, i) => lifeOf(i)));
  return history;
}
