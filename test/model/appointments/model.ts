// The appointments model suite's model: per appointment, the slots it held,
// when, and each one's remind time; the margins its rules allow; and how a
// step opens and closes a slot in it (open, close).
import { EPS_MS, SETTLE_MS, fail } from '../runner.js';

// Shared by every suite (runner.ts); here so the steps and checks import their model from one place.
export { EPS_MS, SETTLE_MS, fail };

// A start this close is refused as past by the time the request lands.
export const MIN_AHEAD_MS = 400;

export type Held = { from: number; untilLow: number; untilHigh: number; remindAt: number };
export type Appt = { id: string; key: string; body: Record<string, unknown>; leadMs: number; cancelled: boolean; current: string; slots: Map<string, Held[]> };
/** `books`: bookings sent, refused ones too (each sends a key of its own). */
export type Model = { appts: Appt[]; books: number };

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
