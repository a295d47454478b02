// The appointments model suite's rules for a reminder row once a run has
// settled: by when a held slot is owed its reminder given the run's faults
// (owedBy), and when a call's outcome is rightly recorded as unknown.
import { type FaultSpan, MODEL_TIMINGS } from '../world.js';

// When a slot held past its remind time is owed its reminder: `calm` after
// the remind time (the job, the write, the call) unless a fault strikes
// before then; each fault that does moves it to `repair` after the fault's
// end (faults in a row add up). The longest repair: a worker killed mid-call
// leaves the row SENDING, taken again once stale (the call's timeout plus
// 5 s from the claim), its job back after a lease, found by a poll or a
// reconciliation pass (1 s).
const OWED = { calmMs: 1_000, repairMs: MODEL_TIMINGS.NOTIFY_TIMEOUT_MS + 5_000 + MODEL_TIMINGS.WORKER_LEASE_MS + 1_000 };

/** When a reminder due from `start` is owed by, given the faults of the run (soak seed 293651839: a reminder withdrawn uncalled though its slot was held 8 s past its remind time, in a run with faults). */
export function owedBy(start: number, spans: readonly FaultSpan[]): number {
  let deadline = start + OWED.calmMs;
  for (const f of [...spans].sort((x, y) => x.from - y.from)) if (f.from < deadline) deadline = Math.max(deadline, f.to + OWED.repairMs);
  return deadline;
}

/**
 * A call whose worker was killed (or stopped, its grace ending) before its outcome was recorded, and whose slot was left
 * before the call was made again: nobody knows whether the receiver took it,
 * and the record says so (CANCELLED, "outcome ... unknown"; docs/guarantees.md, "What does
 * not hold"). Only for a row one of whose calls such a fault could have cut off.
 */
export function outcomeUnknown(n: Row, calls: readonly { at: number }[], spans: readonly FaultSpan[]): boolean {
  if (n.status !== 'CANCELLED' || !/outcome .* unknown/.test(n.lastError ?? '')) return false;
  const cutOff = (at: number) =>
    spans.some((f) => (f.kind === 'killWorker' || f.kind === 'stopWorker') && f.from >= at && f.from <= at + MODEL_TIMINGS.NOTIFY_TIMEOUT_MS + 3_000);
  return calls.some((c) => cutOff(c.at));
}

export type Row = {
  id: string;
  client: string;
  appointmentId: string | null;
  payload: unknown;
  status: string;
  lastError: string | null;
  attempts: number;
  createdAt: Date;
};
export const slotOf = (n: Row) => (n.payload as { startsAt: string }).startsAt;
