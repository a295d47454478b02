// The appointments model suite's model: per appointment, its client, the
// slots it held, when, and each one's remind time; the margins its rules
// allow; how a step opens and closes a slot in it (open, close); and how
// another client's request for it is judged (asUnknown).
import type { Reply } from '../../chaos/drivers/http.js';
import { EPS_MS, type Real, SETTLE_MS, answeredAsUnknown, fail } from '../runner.js';
import { MODEL_CLIENTS, type ModelClient } from '../world.js';
import type { MultiAppt } from './leads.steps.js';

// Shared by every suite (runner.ts); here so the steps and checks import their model from one place.
export { EPS_MS, SETTLE_MS, fail };

// A start this close is refused as past by the time the request lands.
export const MIN_AHEAD_MS = 400;

export type Held = { from: number; untilLow: number; untilHigh: number; remindAt: number };
export type Appt = {
  id: string;
  /** The client that booked it: only its requests may see or change it. */
  client: ModelClient;
  key: string;
  body: Record<string, unknown>;
  leadMs: number;
  cancelled: boolean;
  current: string;
  slots: Map<string, Held[]>;
  /** Moves and cancels the other client sent it (each answered 404, changing nothing). */
  foreign: { move: number; cancel: number };
};
/**
 * `books`: bookings sent, refused ones too (each sends a key of its own);
 * `leads`: lead changes answered 200, those whose remind time had passed
 * (reminded at once), and those made during a reminder's call; `multi`:
 * the bookings with a list of leads (leads.steps.ts).
 */
export type Model = { appts: Appt[]; multi: MultiAppt[]; books: number; leads: { changed: number; atOnce: number; duringCall: number } };

/** A start `offsetMs` after now + lead: its remind time lies `offsetMs` from now (or now, if that passed). */
export const startAt = (leadMs: number, offsetMs: number) => new Date(Date.now() + Math.max(leadMs + offsetMs, MIN_AHEAD_MS + 600)).toISOString();

export function open(a: Appt, startsAt: string, from: number, remindAt: number): void {
  a.current = startsAt;
  const list = a.slots.get(startsAt) ?? [];
  list.push({ from, untilLow: Infinity, untilHigh: Infinity, remindAt });
  a.slots.set(startsAt, list);
}

export function close(a: Appt, low: number, high: number): void {
  const h = a.slots.get(a.current)?.at(-1);
  if (h && h.untilLow === Infinity) {
    h.untilLow = low;
    h.untilHigh = high;
  }
}

/** The client that does not own an appointment: its requests must find nothing. */
export function otherClient(c: ModelClient): ModelClient {
  return MODEL_CLIENTS.find((x) => x !== c) as ModelClient;
}

/** Another client's request for an appointment answered as for an id no appointment has. */
export const notFound = (res: Reply) => res.status === 404 && res.body.code === 'APPOINTMENT_NOT_FOUND';
/** Another client's list of an appointment's notifications: empty, as an unknown id's. */
export const noneListed = (res: Reply) => res.status === 200 && Array.isArray(res.body.notifications) && res.body.notifications.length === 0;

/**
 * Holds the other client's request `what` for appointment `a` (`send`: that
 * request for a given id) to the rule: answered as `expected` says, and
 * exactly as the same request for an id no appointment has.
 */
export function asUnknown(a: Appt, r: Real, what: string, send: (id: string) => Promise<Reply>, expected: (res: Reply) => boolean): Promise<void> {
  return answeredAsUnknown(r, what, `${what} ${a.id} (of ${a.client}) by ${otherClient(a.client)}`, a.id, send, expected);
}
