// The appointments model suite's model: per appointment, the slots it held,
// when, and each one's remind time; the margins its rules allow; and how a
// step opens and closes a slot in it (open, close).
import type { Reply } from '../../chaos/drivers/http.js';

export const EPS_MS = 100;
export const SETTLE_MS = 60_000;

// A start this close is refused as past by the time the request lands.
export const MIN_AHEAD_MS = 400;

export type Held = { from: number; untilLow: number; untilHigh: number; remindAt: number };
export type Appt = { id: string; key: string; body: Record<string, unknown>; leadMs: number; cancelled: boolean; current: string; slots: Map<string, Held[]> };
/** `books`: bookings sent, refused ones too (each sends a key of its own). */
export type Model = { appts: Appt[]; books: number };

export function fail(what: string, r: Reply): never {
  throw new Error(`${what}: answered ${r.status} ${JSON.stringify(r.body)}`);
}

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
